"""Masking of personal and secret data at ingress, in time linear in the text's length.

Masking is an ordered list of :class:`MaskRule` s (an RE2 pattern and a token) applied to
text before any other part of the library sees it, followed by the stateful stages of a
:class:`Masker`: IP addresses, host names in ``host=``-like fields, qualified names and
every host name learned so far become stable pseudonyms (``node-1``, ``ip-1``...) that are
consistent within one masker, i.e. within one job, so per-node reasoning still works. The
mapping from real to pseudonym lives only in memory and is never written anywhere.

Why it is linear
    Every pattern is RE2 (a finite automaton: no backtracking) on UTF-8 bytes. A rule's
    pattern finds an *anchor* (a token prefix, ``name=``); a value of unbounded length is
    then read by a single character-class run, so a declined anchor never makes the same
    bytes be read again from further back. Learned host names are not compiled into a
    regex: text is cut into alphanumeric pieces and looked up in a dict, whatever the
    number of hosts. Private-key blocks are tracked line by line.

What it cannot know
    A host name that appears only in free text, never in a structural position (a launcher
    prefix, ``host=``, ``MASTER_ADDR=``, ``srun: error:``) and without a known domain, is
    not recognised; neither is a secret of no known shape outside a ``name=value`` or
    ``--flag value`` position.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import re2

__all__ = ["DEFAULT_RULES", "MaskRule", "Masker", "mask_secrets"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a DFA that runs out of cache falls back to the NFA: still linear, never noisy
_OPTIONS.max_mem = 32 << 20
_COMPILED: dict[str, Any] = {}


def _rx(pattern: str) -> Any:
    """An RE2 pattern matched on UTF-8 bytes (compiled once)."""
    rx = _COMPILED.get(pattern)
    if rx is None:
        rx = _COMPILED[pattern] = re2.compile(pattern.encode(), options=_OPTIONS)
    return rx


# Single character-class runs: linear in Python's ``re`` too (nothing to backtrack into).
_VALUE_RUN = re.compile(rb"[^\s'\",;&]+")
_QUOTED = {39: re.compile(rb"'[^'\n\r]*'?"), 34: re.compile(rb'"[^"\n\r]*"?')}
_NONSPACE = re.compile(rb"\S+")
_BEARER_RUN = re.compile(rb"[A-Za-z0-9._~+/=-]+")
_AUTH_RUN = re.compile(rb"[^\s'\",;]+")
_HOST_VALUE = re.compile(rb"[A-Za-z0-9][A-Za-z0-9_.\[\],-]*")
_PIECE = re.compile(rb"[A-Za-z0-9]+")
_B64 = re.compile(rb"[A-Za-z0-9+/=]{4,}")
_PSEUDONYM = re.compile(r"(?:node|ip)-\d+")
_PSEUDONYM_B = re.compile(rb"(?:node|ip)-\d+")
_NAME_PARTS = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])")


class _Match(Protocol):
    """What the rules use of an RE2 match on bytes."""

    @property
    def string(self) -> bytes: ...
    def start(self) -> int: ...
    def end(self) -> int: ...
    def span(self) -> tuple[int, int]: ...
    def group(self) -> bytes: ...


#: A match edit: a span and its replacement, or the position to search again from (declined).
Edit = tuple[int, int, bytes] | int
EditFn = Callable[[_Match, bytes], Edit]


def _masked(kind: str) -> bytes:
    return f"<masked:{kind}>".encode()


def _is_word(data: bytes, i: int) -> bool:
    """Whether ``data[i]`` exists and is an ASCII letter, digit or underscore."""
    return 0 <= i < len(data) and (data[i : i + 1].isalnum() or data[i] == 95)


def _whole_edit(kind: str) -> EditFn:
    """Replace the whole match by ``<masked:kind>``."""
    token = _masked(kind)

    def edit(m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        return start, end, token

    return edit


def _name_before_separator(match: bytes) -> bytes:
    """``name`` of a ``name = `` / ``"name": `` / `` --name `` match (patterns have no groups: faster in RE2)."""
    return match.strip(b" \t=:'\"").lstrip(b"-")


@dataclass(frozen=True)
class MaskRule:
    """One masking rule: what ``pattern`` finds is replaced by ``<masked:token>``.

    ``pattern`` is RE2 syntax matched on UTF-8 bytes, never spans a newline and has no
    capturing group (RE2 then needs no second pass for submatches); the whole match is
    replaced. ``edit`` overrides that default: it may read a value of unbounded length
    after the match, keep part of the match, or decline it. ``gate`` is a
    short RE2 pattern that matches wherever the rule can apply (a superset): the line
    detector of :meth:`Masker.detector` is the union of the gates. Without a gate the
    pattern itself is its gate.
    """

    name: str
    pattern: str
    token: str
    gate: str = ""
    edit: EditFn | None = None

    @property
    def regex(self) -> Any:
        """The compiled RE2 pattern."""
        return _rx(self.pattern)

    @property
    def gate_pattern(self) -> str:
        """RE2 source of the rule's gate."""
        return self.gate or self.pattern

    def apply(self, data: bytes) -> tuple[bytes, int]:
        """``data`` (UTF-8) with every match masked, and the number of replacements."""
        return _substitute(self.regex, data, self.edit or _whole_edit(self.token))


def _substitute(regex: Any, data: bytes, edit: EditFn) -> tuple[bytes, int]:
    """Apply ``edit`` to the successive matches of ``regex`` (one RE2 scan of ``data``).

    A match that starts inside text an earlier edit replaced or skipped is passed over.
    """
    out: list[bytes] = []
    last = pos = n = 0
    matches = regex.finditer(data)
    while True:
        m = next(matches, None)
        if m is None:
            break
        start = m.start()
        if start < pos:
            continue
        r = edit(m, data)
        if isinstance(r, int):
            pos = r
        else:
            start, pos, rep = r
            out.append(data[last:start])
            out.append(rep)
            last = pos
            n += 1
        if pos > m.end():  # an edit read past the match: search on from there, not inside
            matches = regex.finditer(data, pos)
    if not n:
        return data, 0
    out.append(data[last:])
    return b"".join(out), n


# -- secret names -------------------------------------------------------------------
# a credential's name ends with one of these words (its last part decides, see _secret_name):
# anchoring them at the end of the name keeps "tokens:", "KeyError:" from even matching
_SECRET_WORDS = (
    r"(?i:password|passwd|pwd|pass|passphrase|passcode|secret|token|key|auth|credentials?|creds|sig|signature"
    r"|cookie|dsn|otp|sas)"
)
_SECRET_PARTS = frozenset(
    {
        "password", "passwd", "pwd", "pass", "passphrase", "passcode", "secret", "token", "key", "apikey", "auth",
        "credential", "credentials", "creds", "sig", "signature", "cookie", "dsn", "otp", "sas",
    }
)  # fmt: skip
_SECRET_SUFFIXES = (
    "password", "passwd", "secret", "token", "apikey", "accesskey", "accountkey", "secretkey", "privatekey", "authkey",
)  # fmt: skip
# "pad_token: <pad>" and "max_token: 512" name a tokenizer setting, not a credential
_NOT_SECRET_TOKENS = frozenset(
    {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "max", "num", "new", "added", "image", "audio"}
)


def _secret_name(name: bytes, *, flag: bool = False) -> bool:
    """Whether a variable, key or flag name names a credential (its last part decides)."""
    parts = [p for p in _NAME_PARTS.split(name[-128:].decode("ascii", "replace")) if p]
    if not parts:
        return False
    last = parts[-1].lower()
    if last in ("pass", "pwd") and len(parts) == 1 and not flag:
        return False  # PWD is the working directory; "pass: 2" a counter
    if last == "token" and len(parts) > 1 and parts[-2].lower() in _NOT_SECRET_TOKENS:
        return False
    return last in _SECRET_PARTS or last.endswith(_SECRET_SUFFIXES)


def _value_span(data: bytes, pos: int) -> tuple[int, int] | None:
    """Span of the value starting at ``pos``: a quoted string (to its closing quote) or a run."""
    if pos >= len(data):
        return None
    quoted = _QUOTED.get(data[pos])
    m = (quoted or _VALUE_RUN).match(data, pos)
    if m is None or m.end() == pos:
        return None
    return m.start(), m.end()


def _keeps(value: bytes) -> bool:
    """Values left alone: already masked, a variable reference, empty quotes."""
    v = value.strip(b"'\"")
    return not v or v.startswith((b"<masked", b"$", b"%(", b"{{", b"***"))


def _assignment_edit(m: _Match, data: bytes) -> Edit:
    if not _secret_name(_name_before_separator(m.group())):
        return m.end()
    span = _value_span(data, m.end())
    if span is None or _keeps(data[span[0] : span[1]]):
        return m.end()
    s, e = span
    q = data[s : s + 1]
    if q in (b"'", b'"'):  # keep the quotes: PGPASSWORD='<masked:secret>'
        closing = q if e - s > 1 and data[e - 1 : e] == q else b""
        return s, e, q + _masked("secret") + closing
    return s, e, _masked("secret")


def _flag_edit(m: _Match, data: bytes) -> Edit:
    if not _secret_name(_name_before_separator(m.group()), flag=True):
        return m.end()
    span = _value_span(data, m.end())
    if span is None or data[span[0] : span[0] + 1] == b"-" or _keeps(data[span[0] : span[1]]):
        return m.end()
    return span[0], span[1], _masked("secret")


def _bearer_edit(m: _Match, data: bytes) -> Edit:
    v = _BEARER_RUN.match(data, m.end())
    if v is None:
        return m.end()
    tok = v.group()
    if len(tok) < 12 or not any(c in b"0123456789+/=" for c in tok):
        return v.end()
    return v.start(), v.end(), _masked("token")


def _authorization_edit(m: _Match, data: bytes) -> Edit:
    v = _AUTH_RUN.match(data, m.end())
    if v is None or _keeps(v.group()):
        return m.end()
    return v.start(), v.end(), _masked("token")


def _url_edit(m: _Match, data: bytes) -> Edit:
    start = data.index(b"://", m.start()) + 3
    if data.startswith(b"<masked", start):
        return m.end()
    user_only = data.find(b":", start, m.end()) < 0
    rep = _masked("user") + (b"" if user_only else b":" + _masked("secret")) + b"@"
    return start, m.end(), rep


def _curl_user_edit(m: _Match, data: bytes) -> Edit:
    v = _NONSPACE.match(data, m.end())
    user = m.group().split()[-1]
    if user.startswith(b"<masked") or v is None:
        return m.end()
    return m.end() - len(user), v.end(), _masked("user") + b":" + _masked("secret")


def _value_after_edit(m: _Match, data: bytes) -> Edit:
    v = _NONSPACE.match(data, m.end())
    if v is None or _keeps(v.group()):
        return m.end()
    return v.start(), v.end(), _masked("secret")


_SHELL_SEPARATORS = (b"|", b"||", b"&&", b";", b"&")


def _login_edit(m: _Match, data: bytes) -> Edit:
    """``wandb login KEY``, ``docker login -u U -p P host``: every argument that is not a flag."""
    end = len(data)
    for stop in (b"\n", b"\r"):
        i = data.find(stop, m.end())
        if 0 <= i < end:
            end = i
    out: list[bytes] = []
    last = m.end()
    changed = False
    for tok in _NONSPACE.finditer(data, m.end(), end):
        word = tok.group()
        if word in _SHELL_SEPARATORS or word.startswith((b"|", b";", b"&&")):
            end = tok.start()
            break
        rep: bytes | None = None
        if word.startswith(b"-"):
            name, eq, value = word.partition(b"=")
            if eq and value and not _keeps(value):
                rep = name + b"=" + _masked("secret")
            elif len(word) > 2 and word[1:2] != b"-" and word[:2] == b"-p":
                rep = b"-p" + _masked("secret")  # -pSECRET
        elif not _keeps(word):
            rep = _masked("secret")
        if rep is not None:
            out.append(data[last : tok.start()])
            out.append(rep)
            last = tok.end()
            changed = True
    if not changed:
        return m.end()
    out.append(data[last:end])
    return m.end(), end, b"".join(out)


_NAME = r"[A-Za-z0-9_.-]*" + _SECRET_WORDS

#: Secret and personal-data rules, in order: token shapes, credentials in positions, e-mails, user names.
DEFAULT_RULES: tuple[MaskRule, ...] = (
    MaskRule("hf-token", r"\bhf_[A-Za-z0-9]{20,}", "token", gate=r"hf_"),
    MaskRule(
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        "token",
        gate=r"gh[pousr]_|github_pat_",
    ),
    MaskRule("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}", "token", gate=r"glpat-"),
    MaskRule(
        "aws-key-id",
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\b",
        "token",
        gate=r"AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA",
    ),
    MaskRule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}", "token", gate=r"AIza"),
    MaskRule(
        "google-oauth", r"\bya29\.[0-9A-Za-z_-]{20,}|\bGOCSPX-[0-9A-Za-z_-]{20,}", "token", gate=r"ya29\.|GOCSPX-"
    ),
    MaskRule("openai-like-key", r"\bsk-[A-Za-z0-9_-]{20,}", "token", gate=r"sk-"),
    MaskRule(
        "stripe-key",
        r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{20,}",
        "token",
        gate=r"k_live_|k_test_|whsec_",
    ),
    MaskRule(
        "slack-token",
        r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-[0-9]-[A-Za-z0-9-]{10,}",
        "token",
        gate=r"xox[abposre]-|xapp-",
    ),
    MaskRule("slack-webhook", r"hooks\.slack\.com/services/[A-Za-z0-9/]+", "token", gate=r"hooks\.slack\.com/"),
    MaskRule("npm-token", r"\bnpm_[A-Za-z0-9]{36}", "token", gate=r"npm_"),
    MaskRule("pypi-token", r"\bpypi-[A-Za-z0-9_-]{50,}", "token", gate=r"pypi-"),
    MaskRule("databricks-token", r"\bdapi[0-9a-f]{32}", "token", gate=r"dapi"),
    MaskRule("sendgrid-key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", "token", gate=r"SG\."),
    MaskRule("digitalocean-token", r"\bdo[opr]_v1_[a-f0-9]{64}", "token", gate=r"do[opr]_v1_"),
    MaskRule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.?[A-Za-z0-9_-]*", "token", gate=r"eyJ"),
    MaskRule("bearer", r"(?i)\b(?:bearer|basic)[ \t]+", "token", edit=_bearer_edit),
    MaskRule(
        "authorization",
        r"(?i)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?",
        "token",
        edit=_authorization_edit,
    ),
    MaskRule(
        "url-credentials",
        r"\b(?i:[a-z][a-z0-9+.-]*)://[^\s/@:]+:[^\s/@]+@|\b(?i:https?)://[^\s/@:]+@",
        "secret",
        gate=r"://",
        edit=_url_edit,
    ),
    MaskRule(
        "login-command",
        r"\b(?:wandb|huggingface-cli|hf|docker|podman|nerdctl|helm|oras|skopeo|buildah|npm|gh|az|gcloud|heroku)"
        r"(?:[ \t]+(?:auth|registry|acr))?[ \t]+login\b",
        "secret",
        edit=_login_edit,
    ),
    MaskRule("curl-user", r"(?:(?m:^)|[ \t])(?:-u|--user)[ \t]+[^\s:]+:", "secret", edit=_curl_user_edit),
    MaskRule("sshpass", r"\bsshpass[ \t]+-p[ \t]*", "secret", edit=_value_after_edit),
    MaskRule(
        "secret-flag",
        r"(?:(?m:^)|[ \t])--?[A-Za-z0-9_-]*" + _SECRET_WORDS + r"[ \t]+",
        "secret",
        edit=_flag_edit,
    ),
    MaskRule(
        "secret-assignment",
        _NAME + r"[\"']?[ \t]*[=:][ \t]*",
        "secret",
        edit=_assignment_edit,
    ),
    MaskRule(
        "email",
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
        "email",
        gate=r"@[A-Za-z0-9-]",
    ),
    MaskRule(
        "home-user",
        r"/(?:home|Users|users|scratch|u)/[A-Za-z0-9._-]+",
        "user",
        edit=lambda m, data: _user_edit(m, data.index(b"/", m.start() + 1) + 1),
    ),
    MaskRule(
        "windows-user",
        r"(?i)[a-z]:\\users\\[^\\\s]+",
        "user",
        edit=lambda m, data: _user_edit(m, m.start() + 9),
    ),
)


def _user_edit(m: _Match, start: int) -> Edit:
    """A user name in a home directory path becomes ``user``."""
    name = m.string[start : m.end()]
    if name.lower() == b"user" or _PSEUDONYM_B.fullmatch(name):  # masked already
        return m.end()
    return start, m.end(), b"user"


# -- private keys -----------------------------------------------------------------
_KEY_BEGIN = _rx(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = _rx(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_HEADER = re.compile(rb".*(?:Proc-Type|DEK-Info|Comment|Version|Hash|Charset): ")  # encrypted PEM headers
#: Most lines a private-key block may span; a longer one is not a key (8192-bit RSA: ~100).
KEY_MAX_LINES = 200


def _mask_key_blocks(data: bytes) -> tuple[bytes, int]:
    """Private keys: a one-line key whole, the body lines of a multi-line block.

    The ``-----BEGIN/END ... PRIVATE KEY-----`` markers of a multi-line block stay (they
    show a key was printed); each body line becomes ``<masked:private-key>``. A block ends
    at its END marker, at a line that is not key material, or after :data:`KEY_MAX_LINES`.
    """
    if b"PRIVATE KEY" not in data:
        return data, 0
    token = _masked("private-key")
    lines = data.split(b"\n")
    n = left = 0
    for i, line in enumerate(lines):
        if left:
            left -= 1
            if _KEY_END.search(line) is not None or _KEY_BEGIN.search(line) is not None:
                left = 0  # the end of this block, or the start of the next
            elif not line.strip() or _KEY_HEADER.match(line):
                pass  # Proc-Type:, DEK-Info: headers and blank lines inside an encrypted key
            else:
                body = line.rstrip()
                last = body.rsplit(None, 1)[-1]
                # "/user": a home directory masked already (/home/user/x), not key material
                if _B64.fullmatch(last) and b"/user" not in last:
                    lines[i] = body[: len(body) - len(last)] + token + line[len(body) :]
                    n += 1
                    continue
                left = 0  # not key material: the block ended without its END marker
        pos = 0
        while True:
            m = _KEY_BEGIN.search(lines[i], pos)
            if m is None:
                break
            line = lines[i]
            e = _KEY_END.search(line, m.end())
            if e is not None:  # a key on one line ("\\n"-escaped in JSON)
                lines[i] = line[: m.start()] + token + line[e.end() :]
                pos = m.start() + len(token)
            else:
                if line[m.end() :].strip():
                    lines[i] = line[: m.end()] + token
                left = KEY_MAX_LINES
                pos = len(lines[i])
            n += 1
    return b"\n".join(lines), n


def _key_block_lines(block: bytes) -> Iterator[int]:
    """Start offsets of the lines of ``block`` that :func:`_mask_key_blocks` may change."""
    pos = 0
    while True:
        m = _KEY_BEGIN.search(block, pos)
        if m is None:
            return
        start = block.rfind(b"\n", 0, m.start()) + 1
        for _ in range(KEY_MAX_LINES + 1):
            yield start
            nl = block.find(b"\n", start)
            if nl < 0:
                return
            if _KEY_END.search(block, start, nl) is not None and start > m.start():
                break
            start = nl + 1
        pos = max(start, m.end())


def mask_secrets(text: str) -> str:
    """Secrets, private keys, e-mails and user names masked (no host or IP pseudonyms).

    >>> mask_secrets("https://bob:hunter2@example.com/x?token=abc123")
    'https://<masked:user>:<masked:secret>@example.com/x?token=<masked:secret>'
    """
    data, _ = _mask_key_blocks(_encode(text))
    for rule in DEFAULT_RULES:
        data, _ = rule.apply(data)
    return _decode(data)


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates (file names) round-trip


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # pragma: no cover - replacements only cut at ASCII characters
        return data.decode("utf-8", "replace")


# -- addresses and host names -----------------------------------------------------
_IPV4 = _rx(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_IPV6 = _rx(r"[0-9A-Fa-f:]*::[0-9A-Fa-f:]*|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f:]*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_HOST_KEY = r"[A-Za-z0-9_.-]*(?i:hosts?|hostnames?|nodename|node|nodelist|hostlist|addr|address|ipaddr|endpoint)"
_HOST_ASSIGN = _rx(_HOST_KEY + r"[\"']?[ \t]*[=:][ \t]*[\"']?")
_HOST_FLAG = _rx(r"(?:(?m:^)|[ \t])--" + _HOST_KEY + r"[ \t]+")
_HOSTNAME = r"[A-Za-z][A-Za-z0-9_-]*[0-9-][A-Za-z0-9_.-]*"
_HOST_CONTEXT = _rx(r"(?:srun: error:|\bon (?:host|node)|\*\*\* (?:JOB|STEP) [0-9.]+ ON)[ \t]+" + _HOSTNAME)
# a launcher host prefix at a line start or after a carriage return (a progress bar redrawn by
# pdsh / mpirun --tag-output: the launcher's own prefix was read before the line was collapsed)
_HOST_PREFIX = _rx(
    r"(?m)(?:^|\r)[ \t]*(?:[A-Za-z][A-Za-z0-9_-]*[0-9][A-Za-z0-9_.-]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[A-Za-z0-9_-]+)*): "
)
_HOST_PARTS = frozenset(
    {"host", "hostname", "hosts", "hostnames", "nodename", "node", "nodelist", "hostlist", "addr", "address", "ipaddr",
     "endpoint"}
)  # fmt: skip
_TLDS = r"(?:local|internal|lan|cluster|corp|compute|intra|cloud|priv|localdomain|com|net|org|io|edu|gov|ai)"
_FQDN = _rx(r"(?:[A-Za-z][A-Za-z0-9-]*\.)+" + _TLDS + r"\b")
_NOT_HOST_SUFFIX = (b"error", b"exception", b"warning", b"warn", b"info", b"debug", b"note")
_NOT_HOSTS = frozenset(
    {"localhost", "node", "user", "ip", "n", "none", "null", "unknown", "true", "false", "masked", "token", "secret",
     "email", "n/a", "auto", "env", "default"}
)  # fmt: skip
_IPV4_FULL = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")
#: Longest host name matched in free text, in alphanumeric pieces (``a-b-c.d.e`` has five).
MAX_HOST_PIECES = 8
#: While fewer distinct first pieces are learned, one RE2 alternation finds them; beyond, a dict lookup per piece.
MAX_FIRST_PIECES_REGEX = 512
#: While at most this many host names are learned, one alternation of literals replaces them (each
#: position costs at most this many literal comparisons, so it stays linear); beyond, the piece lookup.
MAX_HOSTS_LITERAL_REGEX = 64

_GATE_IPV4 = r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"
_GATE_IPV6 = r"::|(?:[0-9A-Fa-f]{1,4}:){7}"
_GATE_HOSTS = (
    r"(?i:host|node|addr|endpoint)[A-Za-z0-9_.-]*[\"']?[ \t]*[=:]|--[A-Za-z0-9_.-]*(?i:host|node|addr|endpoint)"
    r"|srun: error:|\bon (?:host|node)|\*\*\* (?:JOB|STEP)|\r|\." + _TLDS + r"\b|PRIVATE KEY"
    r"|(?m:^)[ \t]*(?:[A-Za-z][A-Za-z0-9_-]*[0-9][A-Za-z0-9_.-]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[A-Za-z0-9_-]+)*): "
)


_SETS: dict[tuple[MaskRule, ...], Any] = {}


def _applicable(rules: tuple[MaskRule, ...], data: bytes) -> set[int] | None:
    """Indices of the rules (then of the :class:`Masker` stages) that can match ``data``: one RE2
    pass for all of them. None means "run every one" (also when RE2 gave up: never a silent miss)."""
    rset = _SETS.get(rules)
    if rset is None:
        rset = re2.Set.SearchSet(options=_OPTIONS)
        for rule in rules:
            rset.Add(rule.gate_pattern.encode())
        for rx in (_IPV4, _IPV6, _HOST_ASSIGN, _HOST_FLAG, _HOST_CONTEXT, _HOST_PREFIX, _FQDN):
            rset.Add(rx.pattern)
        rset.Compile()
        _SETS[rules] = rset
    found = rset.Match(data)
    return set(found) if found else None


class _Hit:
    """A detector match: only its start is meaningful (the start of a flagged line)."""

    __slots__ = ("_start",)

    def __init__(self, start: int) -> None:
        self._start = start

    def start(self) -> int:
        return self._start


def _matching_line_starts(rx: Any, block: bytes) -> set[int]:
    """Offsets of the starts of the lines of ``block`` where ``rx`` matches (one search per line)."""
    starts: set[int] = set()
    pos = 0
    while pos <= len(block):
        m = rx.search(block, pos)
        if m is None:
            break
        starts.add(block.rfind(b"\n", 0, m.start()) + 1)
        nl = block.find(b"\n", m.start())
        if nl < 0:
            break
        pos = nl + 1
    return starts


class _Detector:
    """Finds the lines of a block of UTF-8 bytes that masking may change (a superset).

    The union of the rules' gates (one RE2 pattern, one search per flagged line), the
    lines of private-key blocks, and the lines holding a piece that starts a learned host
    name (a dict lookup per piece, however many hosts are known).
    """

    __slots__ = ("_masker",)

    def __init__(self, masker: Masker) -> None:
        self._masker = masker

    def finditer(self, block: bytes) -> Iterator[_Hit]:
        """A :class:`_Hit` at the start of every line of ``block`` that masking may change."""
        starts = _matching_line_starts(self._masker._gate(), block)
        if b"PRIVATE KEY" in block:
            starts.update(_key_block_lines(block))
        first_rx = self._masker._first_regex()
        if first_rx is not None:
            starts |= _matching_line_starts(first_rx, block)
        elif self._masker._first and not self._masker._first.keys().isdisjoint(_PIECE.findall(block)):
            first = self._masker._first
            pos = 0
            for line in block.split(b"\n"):
                if not first.keys().isdisjoint(_PIECE.findall(line)):
                    starts.add(pos)
                pos += len(line) + 1
        for s in sorted(starts):
            if s < len(block):  # never the empty "line" after a final newline
                yield _Hit(s)

    def search(self, block: bytes) -> _Hit | None:
        """The first hit in ``block``, or None."""
        return next(self.finditer(block), None)


@dataclass
class Masker:
    """Masks one job's text. Create one per job so pseudonyms stay consistent within it.

    >>> m = Masker()
    >>> m.mask("connect to 192.168.1.7 failed; mail bob@example.com")
    'connect to ip-1 failed; mail <masked:email>'
    >>> m.mask("MASTER_ADDR=gpu-node-7 --password hunter22; gpu-node-7 is down")
    'MASTER_ADDR=node-1 --password <masked:secret>; node-1 is down'
    """

    rules: tuple[MaskRule, ...] = DEFAULT_RULES
    counts: dict[str, int] = field(default_factory=dict)
    _hosts: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _ips: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _n_nodes: int = field(default=0, init=False, repr=False)
    # free-text matching of learned hosts: name -> pseudonym, first piece -> most pieces
    _free: dict[bytes, bytes] = field(default_factory=dict, init=False, repr=False)
    _first: dict[bytes, int] = field(default_factory=dict, init=False, repr=False)
    _first_rx: Any = field(default=None, init=False, repr=False)
    _known_rx: re.Pattern[bytes] | None = field(default=None, init=False, repr=False)

    def _gate(self) -> Any:
        parts = [r.gate_pattern for r in self.rules] + [_GATE_IPV4, _GATE_IPV6, _GATE_HOSTS]
        return _rx("|".join(f"(?:{p})" for p in parts))

    def detector(self) -> Any:
        """An object whose ``finditer(block: bytes)`` yields one hit at the start of every
        line that masking may change (rule gates, private-key blocks, learned hosts)."""
        return _Detector(self)

    # -- pseudonyms -------------------------------------------------------------------
    def pseudonym(self, host: str) -> str:
        """Pseudonym of a host given in a structural position (a name or an IP address)."""
        if _IPV4_FULL.fullmatch(host):
            return self._ip_pseudonym(host)
        if ":" in host and _valid_ipv6(host.encode("ascii", "replace")):
            return self._ip_pseudonym(host)
        return self.host_pseudonym(host)

    def _ip_pseudonym(self, ip: str) -> str:
        p = self._ips.get(ip)
        if p is None:
            p = self._ips[ip] = f"ip-{len(self._ips) + 1}"
        self.counts["ip"] = self.counts.get("ip", 0) + 1
        return p

    def host_pseudonym(self, host: str) -> str:
        """Return (and remember) the pseudonym for ``host``; pseudonyms map to themselves."""
        if not host or _PSEUDONYM.fullmatch(host) or host.lower() in _NOT_HOSTS or host.startswith("<masked"):
            return host
        p = self._hosts.get(host)
        if p is None:
            short = host.split(".", 1)[0]  # gpu-7 and gpu-7.cluster.local are one node
            p = self._hosts.get(short)
            if p is None:
                self._n_nodes += 1
                p = f"node-{self._n_nodes}"
            self._hosts[host] = p
            self._register(host, p)
            if (
                short != host
                and short.lower() not in _NOT_HOSTS
                and short not in self._hosts
                and not _PSEUDONYM.fullmatch(short)
            ):
                self._hosts[short] = p
                self._register(short, p)
        return p

    def _register(self, host: str, pseudonym: str) -> None:
        """Make ``host`` matched in free text when it cannot be an ordinary word."""
        name = _encode(host)
        if len(name) > 253 or not any(c in name for c in b"0123456789-."):
            return  # "main", "login": masked where they stand in a host field, not everywhere
        pieces = _PIECE.findall(name)
        if not pieces or len(pieces) > MAX_HOST_PIECES or not name[:1].isalnum() or not name[-1:].isalnum():
            return
        self._free[name] = pseudonym.encode()
        self._known_rx = None
        first = pieces[0]
        if first not in self._first:
            self._first_rx = None
        if self._first.get(first, 0) < len(pieces):
            self._first[first] = len(pieces)

    def learn_hosts(self, hosts: Iterable[str]) -> None:
        """Register hostnames found in structural positions (prefixes, launcher summaries)."""
        for h in hosts:
            self.host_pseudonym(h)

    @property
    def n_hosts(self) -> int:
        """Distinct hosts (pseudonyms) known so far."""
        return self._n_nodes

    @property
    def n_host_names(self) -> int:
        """Host names (and aliases) learned so far; grows whenever masking learns a name."""
        return len(self._hosts)

    # -- masking ----------------------------------------------------------------------
    def mask(self, text: str) -> str:
        """Mask secrets, e-mails, user names, IPs and known/qualified hostnames in ``text``."""
        return _decode(self._mask(_encode(text)))

    def mask_known_hosts(self, text: str) -> str:
        """Replace hostnames learned so far (for lines kept before a host was learned)."""
        if not self._first:
            return text
        return _decode(self._mask_known(_encode(text)))

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

    def _count(self, name: str, n: int) -> None:
        if n:
            self.counts[name] = self.counts.get(name, 0) + n

    def _mask(self, data: bytes) -> bytes:
        data, n = _mask_key_blocks(data)
        self._count("private-key", n)
        todo = _applicable(self.rules, data)
        for i, rule in enumerate(self.rules):
            if todo is None or i in todo:
                data, n = rule.apply(data)
                self._count(rule.name, n)
        stages: tuple[tuple[Any, EditFn], ...] = (
            (_IPV4, self._ipv4_edit),
            (_IPV6, self._ipv6_edit),
            (_HOST_ASSIGN, self._host_field_edit),
            (_HOST_FLAG, self._host_field_edit),
            (_HOST_CONTEXT, self._host_context_edit),
            (_HOST_PREFIX, self._host_prefix_edit),
            (_FQDN, self._fqdn_edit),
        )
        for j, (regex, edit) in enumerate(stages, start=len(self.rules)):
            if todo is None or j in todo:
                data, _ = _substitute(regex, data, edit)
        return self._mask_known(data)

    def _ipv4_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if start and (_is_word(data, start - 1) or data[start - 1] == 46):
            return end  # part of a longer token (version string, path)
        if _is_word(data, end) or (data[end : end + 1] == b"." and data[end + 1 : end + 2].isdigit()):
            return end
        ip = m.group().decode()
        if any(int(o) > 255 for o in ip.split(".")):
            return end
        before = data[max(0, start - 9) : start].lower()
        if b"version" in before or before.endswith((b"v", b"ver ", b"==")) or data[end : end + 1] == b"+":
            return end  # a four-part version number
        return start, end, self._ip_pseudonym(ip).encode()

    def _ipv6_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if _is_word(data, end) or (data[end : end + 1] == b"." and data[end + 1 : end + 2].isdigit()):
            return m.end()  # part of a longer token ("::a10.1.2.3": an embedded IPv4 tail)
        if data[end - 1 : end] == b":" and data[end - 2 : end] != b"::":
            end -= 1  # "fe80::1: connection refused"
        elif data[end : end + 1] == b":":
            return m.end()
        # the address is the longest valid tail of the run: "ib0:fe80::1" (NCCL's if:addr) is
        # read from after the first colon; a run longer than any address is tried on its tail only
        lo = max(start, end - 45)
        candidates = [start] if start == lo else []
        candidates += [i + 1 for i in range(lo, end) if data[i] == 58 and data[i + 1 : i + 2] != b":" and i > start]
        for s in candidates:
            if s == start:
                if _is_word(data, s - 1) or (data[s - 1 : s] in (b".", b"-") and s > 0):
                    continue
                if data[s : s + 1] == b":" and data[s : s + 2] != b"::":
                    s += 1
            elif data[s - 2 : s - 1] == b":":
                continue
            ip = data[s:end]
            if ip and ip[-1] in _HEX and _valid_ipv6(ip):
                return s, end, self._ip_pseudonym(ip.decode()).encode()
        return m.end()

    def _host_value(self, data: bytes, pos: int) -> Edit:
        """The host name (or node list) starting at ``pos`` becomes its pseudonym."""
        v = _HOST_VALUE.match(data, pos)
        if v is None:
            return pos
        value = v.group().rstrip(b".,")
        end = v.start() + len(value)
        text = value.decode()
        if not value or data[end : end + 3] == b"://" or _keeps(value):
            return end
        if b"[" in value:  # a Slurm node list, gpu-[001-004,007]
            return v.start(), end, _masked("nodelist")
        if b"," in value:
            parts = text.split(",")
            if all(p and not p[0].isdigit() for p in parts):
                return v.start(), end, ",".join(self.host_pseudonym(p) for p in parts).encode()
            return end
        if text[0].isdigit() or text.lower() in _NOT_HOSTS or _PSEUDONYM.fullmatch(text):
            return end  # "node: 0", an IP masked already
        self._count("host", 1)
        return v.start(), end, self.host_pseudonym(text).encode()

    def _host_field_edit(self, m: _Match, data: bytes) -> Edit:
        name = _name_before_separator(m.group())
        parts = [p for p in _NAME_PARTS.split(name[-128:].decode("ascii", "replace")) if p]
        if not parts or parts[-1].lower() not in _HOST_PARTS:
            return m.end()
        return self._host_value(data, m.end())

    def _host_context_edit(self, m: _Match, data: bytes) -> Edit:
        host = m.group().split()[-1]
        e = m.end()
        s = e - len(host)
        if host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(b".py"):
            return m.end()
        return s, e, self.host_pseudonym(host.decode()).encode()

    def _host_prefix_edit(self, m: _Match, data: bytes) -> Edit:
        host = m.group().strip()[:-1]
        e = m.end() - 2
        s = e - len(host)
        if host.lower().endswith(_NOT_HOST_SUFFIX) or host.endswith(b".py"):
            return m.end()
        return s, e, self.host_pseudonym(host.decode()).encode()

    def _fqdn_edit(self, m: _Match, data: bytes) -> Edit:
        start, end = m.span()
        if start and (_is_word(data, start - 1) or data[start - 1] in b".-"):
            return end
        if data[end : end + 1] == b"-" or end - start > 253:
            return end
        if _PSEUDONYM_B.fullmatch(m.group().split(b".", 1)[0]):
            return end  # "ip-1.com": an address masked already (10.1.2.3.com)
        return start, end, self.host_pseudonym(m.group().decode()).encode()

    def _first_regex(self) -> Any | None:
        """RE2 alternation of the first pieces of the learned hosts, while they are few."""
        if not self._first or len(self._first) > MAX_FIRST_PIECES_REGEX:
            return None
        if self._first_rx is None:
            alternation = b"|".join(re2.escape(p) for p in sorted(self._first, key=len, reverse=True))
            self._first_rx = re2.compile(alternation, options=_OPTIONS)
        return self._first_rx

    def _candidates(self, data: bytes) -> Iterator[int]:
        """Offsets in ``data`` where a piece that starts a learned host name begins."""
        first = self._first
        rx = self._first_regex()
        if rx is None:
            for m in _PIECE.finditer(data):
                if m.group() in first:
                    yield m.start()
            return
        pos = 0
        for m in rx.finditer(data):
            start = m.start()
            if start < pos:
                continue
            piece = _PIECE.match(data, start)
            assert piece is not None  # every first piece is alphanumeric
            pos = piece.end()
            if (start == 0 or not data[start - 1 : start].isalnum()) and piece.group() in first:
                yield start

    def _mask_known(self, data: bytes) -> bytes:
        """Learned host names wherever they stand between non-alphanumeric characters."""
        first = self._first
        if not first:
            return data
        free = self._free
        if len(free) <= MAX_HOSTS_LITERAL_REGEX:
            if self._known_rx is None:
                names = b"|".join(re.escape(h) for h in sorted(free, key=len, reverse=True))
                self._known_rx = re.compile(rb"(?<![A-Za-z0-9])(?:" + names + rb")(?![A-Za-z0-9])")
            return self._known_rx.sub(lambda m: free[m.group()], data)
        if self._first_regex() is None and first.keys().isdisjoint(_PIECE.findall(data)):
            return data
        out: list[bytes] = []
        last = 0
        for start in self._candidates(data):
            if start < last:
                continue
            pieces = list(itertools.islice(_PIECE.finditer(data, start), first[_piece_at(data, start)]))
            for k in range(len(pieces), 0, -1):
                end = pieces[k - 1].end()
                p = free.get(data[start:end])
                if p is not None:
                    out.append(data[last:start])
                    out.append(p)
                    last = end
                    break
        if not out:
            return data
        out.append(data[last:])
        return b"".join(out)


def _piece_at(data: bytes, start: int) -> bytes:
    m = _PIECE.match(data, start)
    return m.group() if m is not None else b""


def _valid_ipv6(ip: bytes) -> bool:
    if len(ip) > 45 or ip == b"::" or ip.count(b":") < 2:
        return False
    try:
        ipaddress.IPv6Address(ip.decode("ascii"))
    except ValueError:
        return False
    return True
