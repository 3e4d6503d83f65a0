"""Masking of personal and secret data at ingress.

Masking is an ordered list of ``(name, regex, replacement)`` rules applied to text before
any other part of the library sees it. Hostnames and IP addresses become stable
pseudonyms (``node-1``, ``ip-1``...) that are consistent within one :class:`Masker`, i.e.
within one job, so per-node reasoning still works. The mapping from real to pseudonym
lives only in memory and is never written anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import re2

__all__ = ["DEFAULT_RULES", "MaskRule", "Masker"]


@dataclass(frozen=True)
class MaskRule:
    """One masking rule: ``pattern`` is replaced by ``replacement``.

    ``gate`` is an RE2 pattern that matches wherever the rule could match (a superset);
    the slower Python rule only runs on text the gate finds something in. Gates only save
    time, never change the result.
    """

    name: str
    pattern: re.Pattern[str]
    replacement: str
    gate: str = ""

    @property
    def gate_re(self) -> re2._Regexp:
        return _compiled_gate(self.gate)


# Order matters: secrets before e-mails before IPs. No rule may match across a newline.
DEFAULT_RULES: tuple[MaskRule, ...] = (
    MaskRule(
        "private-key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
        "<masked:private-key>",
        gate="-----BEGIN",
    ),
    MaskRule("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "<masked:token>", gate="hf_[A-Za-z0-9]{20}"),
    MaskRule(
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"),
        "<masked:token>",
        gate="gh[pousr]_[A-Za-z0-9]{20}|github_pat_",
    ),
    MaskRule(
        "aws-key-id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "<masked:token>", gate="(?:AKIA|ASIA)[0-9A-Z]{16}"
    ),
    MaskRule(
        "openai-like-key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), "<masked:token>", gate="sk-[A-Za-z0-9_-]{20}"
    ),
    MaskRule("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), "<masked:token>", gate="xox[abposr]-"),
    MaskRule(
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        "<masked:token>",
        gate="eyJ[A-Za-z0-9_-]{8}",
    ),
    MaskRule(
        "bearer",
        re.compile(r"(?i)\b(bearer|basic)[ \t]+[A-Za-z0-9._~+/=-]{12,}"),
        r"\1 <masked:token>",
        gate="(?i:bearer|basic)[ \\t]",
    ),
    MaskRule(
        "secret-assignment",
        re.compile(
            r"(?i)((?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|pwd|credentials?)[\w.-]*)"
            r"([ \t]*[=:][ \t]*)(['\"]?)(?!<masked)(?=[^\s'\",;]*[A-Za-z])([^\s'\",;]{6,})"
        ),
        r"\1\2\3<masked:secret>",
        gate="(?i:api[_-]?key|access[_-]?key|secret|token|passw|pwd|credential)[\\w.-]*[ \\t]*[=:]",
    ),
    MaskRule(
        "url-credentials",
        re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/@:]+:[^\s/@]+@"),
        r"\1<masked:user>:<masked:secret>@",
        gate="://[^\\s/@:]+:[^\\s/@]+@",
    ),
    MaskRule(
        "email",
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"),
        "<masked:email>",
        gate="@[A-Za-z0-9.-]+\\.[A-Za-z]{2}",
    ),
    MaskRule(
        "home-user",
        re.compile(r"(/(?:home|Users|users|scratch|u)/)(?!user/|user\b)([A-Za-z0-9._-]+)"),
        r"\1user",
        gate="/(?:home|Users|users|scratch|u)/",
    ),
    MaskRule(
        "windows-user",
        re.compile(r"(?i)([A-Z]:\\Users\\)(?!user\\)([^\\\s]+)"),
        r"\1user",
        gate="(?i:[a-z]:\\\\users\\\\)",
    ),
)

_IPV4_RE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_IPV6_RE = re.compile(
    r"(?<![\w.])(?=[0-9a-fA-F:]*::|(?:[0-9a-fA-F]{1,4}:){7})(?:[0-9a-fA-F]{1,4}|:)(?:[0-9a-fA-F]{0,4}:){1,7}[0-9a-fA-F]{1,4}(?![\w:])"
)

# Hostnames seen in structural positions (discovered elsewhere) plus fully qualified names.
_FQDN = re.compile(
    r"(?<![\w.-])(?:[a-zA-Z][a-zA-Z0-9-]{0,62}\.)+(?:local|internal|lan|cluster|corp|compute|intra|"
    r"cloud|priv|localdomain|ec2\.internal|com|net|org|io|edu|gov|ai)(?![\w-])"
)
# A fast superset detector (RE2, linear time): a block line is masked by the full rules only
# when its gate finds something in it; the detector is the union of all gates.
_GATE_IPV4 = r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"
_GATE_IPV6 = r"[0-9a-fA-F]{0,4}::[0-9a-fA-F]{1,4}|::ffff:|(?:[0-9a-fA-F]{1,4}:){7}"
_GATE_FQDN = r"\.(?:local|internal|lan|cluster|corp|compute|intra|cloud|priv|localdomain|com|net|org|io|edu|gov|ai)\b"
_GATE_HOST_FIELD = r"(?i:host(?:name)?|nodename)[ \t]*[:=]|srun: error:|\bon (?:host|node) "
_GATES: dict[str, re2._Regexp] = {}


def _compiled_gate(pattern: str) -> re2._Regexp:
    g = _GATES.get(pattern)
    if g is None:
        g = _GATES[pattern] = re2.compile(pattern)
    return g


_HOST_FIELD = re.compile(
    r"(?i)\b(host(?:name)?|nodename)([ \t]*[:=][ \t]*)([A-Za-z][\w-]*(?:\.[\w-]+)*)"
    r"|(srun: error:|\bon (?:host|node))([ \t]+)([A-Za-z][\w-]*[\d-][\w.-]*)"
)
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
        self._detector: re2._Regexp | None = None

    def detector(self) -> re2._Regexp:
        """RE2 pattern finding every place any rule (or a known host) could apply."""
        if self._detector is None:
            parts = [r.gate for r in self.rules if r.gate] + [_GATE_IPV4, _GATE_IPV6, _GATE_FQDN, _GATE_HOST_FIELD]
            if self._hosts:
                parts.append("|".join(re2.escape(h) for h in sorted(self._hosts, key=len, reverse=True)))
            self._detector = re2.compile("|".join(f"(?:{p})" for p in parts).encode())
        return self._detector

    def pseudonym(self, host: str) -> str:
        """Pseudonym of a host given in a structural position (a name or an IPv4 address)."""
        if _IPV4_FULL.match(host):
            return self._ip_pseudonym(host)
        return self.host_pseudonym(host)

    def _ipv4_sub(self, m: re.Match[str]) -> str:
        ip = m.group(0)
        text = m.string
        start, end = m.span()
        if start and (text[start - 1].isalnum() or text[start - 1] in "._"):
            return ip  # part of a longer token (version string, path)
        if end < len(text) and (
            text[end].isalnum() or text[end] == "_" or (text[end] == "." and text[end + 1 : end + 2].isdigit())
        ):
            return ip
        if any(int(o) > 255 for o in ip.split(".")):
            return ip
        before = text[max(0, start - 9) : start].lower()
        if "version" in before or before.endswith(("v", "ver ", "=")) or text[end : end + 1] == "+":
            return ip  # a four-part version number
        return self._ip_pseudonym(ip)

    def _ipv6_sub(self, m: re.Match[str]) -> str:
        ip = m.group(0)
        if not any(c in "abcdefABCDEF0123456789" for c in ip.replace(":", "")):
            return ip  # a lone "::" is not an address
        return self._ip_pseudonym(ip)

    def _host_field_sub(self, m: re.Match[str]) -> str:
        key, sep, host = m.group(1, 2, 3) if m.group(1) is not None else m.group(4, 5, 6)
        return key + sep + self.host_pseudonym(host)

    def _ip_pseudonym(self, ip: str) -> str:
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
            short = host.split(".", 1)[0]  # gpu-7 and gpu-7.cluster.local are one node
            p = self._hosts.get(short) or f"node-{len(set(self._hosts.values())) + 1}"
            self._hosts[host] = p
            if short != host and short.lower() not in _NOT_HOSTS:
                self._hosts.setdefault(short, p)
            self._host_re = None
            self._detector = None
        return p

    def learn_hosts(self, hosts: Iterable[str]) -> None:
        """Register hostnames found in structural positions (prefixes, launcher summaries)."""
        for h in hosts:
            self.host_pseudonym(h)

    @property
    def n_hosts(self) -> int:
        return len(set(self._hosts.values()))

    @property
    def n_host_names(self) -> int:
        """Host names (and aliases) learned so far; grows whenever masking learns a name."""
        return len(self._hosts)

    def _hosts_regex(self) -> re.Pattern[str] | None:
        if not self._hosts:
            return None
        if self._host_re is None:
            names = sorted(self._hosts, key=len, reverse=True)
            self._host_re = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names)) + r")(?!\w)")
        return self._host_re

    def mask_known_hosts(self, text: str) -> str:
        """Replace hostnames learned so far (for lines kept before a host was learned)."""
        host_re = self._hosts_regex()
        if host_re is None or host_re.search(text) is None:
            return text
        return host_re.sub(lambda m: self._hosts.get(m.group(0), m.group(0)), text)

    # -- masking ----------------------------------------------------------------
    def mask(self, text: str) -> str:
        """Mask secrets, e-mails, user names, IPs and known/qualified hostnames in ``text``."""
        for rule in self.rules:
            if rule.gate and rule.gate_re.search(text) is None:
                continue
            text, n = rule.pattern.subn(rule.replacement, text)
            if n:
                self.counts[rule.name] = self.counts.get(rule.name, 0) + n
        if _compiled_gate(_GATE_IPV4).search(text) is not None:
            text = _IPV4_RE.sub(self._ipv4_sub, text)
        if _compiled_gate(_GATE_IPV6).search(text) is not None:
            text = _IPV6_RE.sub(self._ipv6_sub, text)
        if _compiled_gate(_GATE_HOST_FIELD).search(text) is not None:
            text = _HOST_FIELD.sub(self._host_field_sub, text)
        if _compiled_gate(_GATE_FQDN).search(text) is not None:
            text = _FQDN.sub(lambda m: self.host_pseudonym(m.group(0)), text)
        host_re = self._hosts_regex()
        if host_re is not None:
            text = host_re.sub(lambda m: self._hosts.get(m.group(0), m.group(0)), text)
        return text

    def mask_lines(self, lines: list[str]) -> list[str]:
        """Mask several lines at once (one pass of each rule); the line count is preserved."""
        if not lines:
            return lines
        if len(lines) == 1:
            return [self.mask(lines[0])]
        out = self.mask("\n".join(lines)).split("\n")
        if len(out) != len(lines):  # pragma: no cover - rules never add or remove newlines
            return [self.mask(line) for line in lines]
        return out
