"""Masking of personal and secret data at ingress.

Masking is an ordered list of ``(name, regex, replacement)`` rules applied to text before
any other part of the library sees it. Hostnames and IP addresses become stable
pseudonyms (``node-1``, ``ip-1``...) that are consistent within one :class:`Masker`, i.e.
within one job, so per-node reasoning still works. The mapping from real to pseudonym
lives only in memory and is never written anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import re2
from dataclasses import dataclass, field

__all__ = ["Masker", "MaskRule", "DEFAULT_RULES"]


@dataclass(frozen=True)
class MaskRule:
    """One masking rule: ``pattern`` is replaced by ``replacement``.

    ``triggers`` are lower-case substrings one of which must occur (in the lower-cased text)
    for the rule to be able to match; they only save time, never change the result.
    """

    name: str
    pattern: re.Pattern[str]
    replacement: str
    triggers: tuple[str, ...] = ()


# Order matters: secrets before e-mails before IPs. No rule may match across a newline.
DEFAULT_RULES: tuple[MaskRule, ...] = (
    MaskRule("private-key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S), "<masked:private-key>", triggers=('-----begin',)),
    MaskRule("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "<masked:token>", triggers=('hf_',)),
    MaskRule("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"), "<masked:token>", triggers=('gh', 'github_pat_')),
    MaskRule("aws-key-id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "<masked:token>", triggers=('akia', 'asia')),
    MaskRule("openai-like-key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), "<masked:token>", triggers=('sk-',)),
    MaskRule("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), "<masked:token>", triggers=('xox',)),
    MaskRule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "<masked:token>", triggers=('eyj',)),
    MaskRule("bearer", re.compile(r"(?i)\b(bearer|basic)[ \t]+[A-Za-z0-9._~+/=-]{12,}"), r"\1 <masked:token>", triggers=('bearer', 'basic')),
    MaskRule(
        "secret-assignment",
        re.compile(
            r"(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|pwd|credentials?)[\w.-]*)"
            r"([ \t]*[=:][ \t]*)(['\"]?)(?!<masked)(?=[^\s'\",;]*[A-Za-z])([^\s'\",;]{6,})"
        ),
        r"\1\2\3<masked:secret>",
        triggers=("key", "secret", "token", "passw", "pwd", "credential"),
    ),
    MaskRule("url-credentials", re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@"), r"\1<masked:user>:<masked:secret>@", triggers=('@',)),
    MaskRule("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), "<masked:email>", triggers=('@',)),
    MaskRule(
        "home-user",
        re.compile(r"(/(?:home|Users|users|scratch|u)/)(?!user/|user\b)([A-Za-z0-9._-]+)"),
        r"\1user",
        triggers=("/home/", "/users/", "/scratch/", "/u/"),
    ),
    MaskRule("windows-user", re.compile(r"(?i)([A-Z]:\\Users\\)(?!user\\)([^\\\s]+)"), r"\1user", triggers=(':\\\\users\\\\',)),
)

_IPV4 = r"(?<![\w.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\w.]*\d)"
_IPV6 = r"(?<![\w:.])(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){7})(?:[0-9a-fA-F]{1,4}|:)(?:[0-9a-fA-F]{0,4}:){1,7}[0-9a-fA-F]{1,4}(?![\w:])"

# Hostnames seen in structural positions (discovered elsewhere) plus fully qualified names.
_FQDN = re.compile(
    r"(?<![\w.-])(?:[a-zA-Z][a-zA-Z0-9-]{0,62}\.)+(?:local|internal|lan|cluster|corp|compute|intra|"
    r"cloud|priv|localdomain|ec2\.internal|com|net|org|io|edu|gov|ai)(?![\w-])"
)
# A fast superset detector (RE2, linear time): a block line is masked by the full rules only
# when this finds something in it. Every rule above must be covered by one alternative here.
_DETECTOR_PARTS = (
    r"-----BEGIN",
    r"hf_[A-Za-z0-9]{20}",
    r"gh[pousr]_[A-Za-z0-9]{20}",
    r"github_pat_",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"sk-[A-Za-z0-9_-]{20}",
    r"xox[abposr]-",
    r"eyJ[A-Za-z0-9_-]{8}",
    r"(?i:bearer|basic)[ \t]",
    r"(?i:api[_-]?key|access[_-]?key|secret|token|passw|pwd|credential)",
    r"://[^\s/@:]+:[^\s/@]+@",
    r"@[A-Za-z0-9.-]+\.[A-Za-z]{2}",
    r"/(?:home|Users|users|scratch|u)/",
    r"(?i:[a-z]:\\users\\)",
    r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}",
    r"[0-9a-fA-F]{0,4}::[0-9a-fA-F]{1,4}|::ffff:|(?:[0-9a-fA-F]{1,4}:){7}",
    r"\.(?:local|internal|lan|cluster|corp|compute|intra|cloud|priv|localdomain|com|net|org|io|edu|gov|ai)\b",
    r"(?i:host(?:name)?|node(?:name)?)[ \t]*[:=]",
)
_HOST_FIELD = re.compile(r"(?i)\b(host(?:name)?|nodename)([ \t]*[:=][ \t]*)([A-Za-z][\w-]*(?:\.[\w-]+)*)")
_NOT_HOSTS = frozenset({"localhost", "node", "user", "ip", "n", "none", "null", "unknown", "true", "false"})
_IPV4_FULL = re.compile(r"^(?:\d{1,3}\.){3}\d{1,3}$")
_PSEUDONYM = re.compile(r"^(?:node|ip)-\d+$")


@dataclass
class Masker:
    """Masks one job's text. Create one per job so pseudonyms stay consistent within it.

    >>> m = Masker()
    >>> m.mask("connect to 192.168.1.7 failed; mail bob@example.com")
    'connect to ip-1 failed; mail <masked:email>'
    """

    rules: tuple[MaskRule, ...] = DEFAULT_RULES
    _hosts: dict[str, str] = field(default_factory=dict, repr=False)
    _ips: dict[str, str] = field(default_factory=dict, repr=False)
    _host_re: re.Pattern[str] | None = field(default=None, repr=False)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ip_re = re.compile(f"{_IPV4}|{_IPV6}")
        self._ip_sub: Callable[[re.Match[str]], str] = self._ip_pseudonym
        self._detector: re2._Regexp | None = None  # type: ignore[name-defined]

    def detector(self) -> re2._Regexp:  # type: ignore[name-defined]
        """RE2 pattern finding every place any rule (or a known host) could apply."""
        if self._detector is None:
            parts = list(_DETECTOR_PARTS)
            if self._hosts:
                parts.append("|".join(re2.escape(h) for h in sorted(self._hosts, key=len, reverse=True)))
            self._detector = re2.compile("|".join(f"(?:{p})" for p in parts).encode())
        return self._detector

    def pseudonym(self, host: str) -> str:
        """Pseudonym of a host given in a structural position (a name or an IPv4 address)."""
        if _IPV4_FULL.match(host):
            p = self._ips.get(host)
            if p is None:
                p = self._ips[host] = f"ip-{len(self._ips) + 1}"
            return p
        return self.host_pseudonym(host)

    # -- pseudonyms -------------------------------------------------------------
    def _ip_pseudonym(self, m: re.Match[str]) -> str:
        ip = m.group(0)
        if ip.count(":") and not any(c in "abcdefABCDEF0123456789" for c in ip.replace(":", "")):
            return ip  # a lone "::" is not an address
        p = self._ips.get(ip)
        if p is None:
            p = self._ips[ip] = f"ip-{len(self._ips) + 1}"
        self.counts["ip"] = self.counts.get("ip", 0) + 1
        return p

    def host_pseudonym(self, host: str) -> str:
        """Return (and remember) the pseudonym for ``host``; pseudonyms map to themselves."""
        if not host or _PSEUDONYM.match(host) or host.lower() in _NOT_HOSTS or host.startswith("<masked"):
            return host
        p = self._hosts.get(host)
        if p is None:
            p = self._hosts[host] = f"node-{len(self._hosts) + 1}"
            self._host_re = None
            self._detector = None
        return p

    def learn_hosts(self, hosts: Iterable[str]) -> None:
        """Register hostnames found in structural positions (prefixes, launcher summaries)."""
        for h in hosts:
            self.host_pseudonym(h)

    @property
    def n_hosts(self) -> int:
        return len(self._hosts)

    def _hosts_regex(self) -> re.Pattern[str] | None:
        if not self._hosts:
            return None
        if self._host_re is None:
            names = sorted(self._hosts, key=len, reverse=True)
            self._host_re = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-])")
        return self._host_re

    # -- masking ----------------------------------------------------------------
    def mask(self, text: str) -> str:
        """Mask secrets, e-mails, user names, IPs and known/qualified hostnames in ``text``."""
        lower = text.lower()
        for rule in self.rules:
            if rule.triggers and not any(t in lower for t in rule.triggers):
                continue
            text, n = rule.pattern.subn(rule.replacement, text)
            if n:
                self.counts[rule.name] = self.counts.get(rule.name, 0) + n
        if "." in text or ":" in text:
            text = self._ip_re.sub(self._ip_sub, text)
        if "ost" in text or "ode" in text:
            text = _HOST_FIELD.sub(lambda m: m.group(1) + m.group(2) + self.host_pseudonym(m.group(3)), text)
        if "." in text:
            text = _FQDN.sub(lambda m: self.host_pseudonym(m.group(0)), text)
        host_re = self._hosts_regex()
        if host_re is not None:
            text = host_re.sub(lambda m: self._hosts[m.group(0)], text)
        return text

    def mask_lines(self, lines: list[str]) -> list[str]:
        """Mask several lines at once (one pass of each rule); the line count is preserved."""
        if not lines:
            return lines
        out = self.mask("\n".join(lines)).split("\n")
        if len(out) != len(lines):  # pragma: no cover - rules never add or remove newlines
            return [self.mask(line) for line in lines]
        return out
