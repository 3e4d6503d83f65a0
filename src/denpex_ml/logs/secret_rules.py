"""Secret rules: the token formats, ``name=value`` / ``--flag value`` credentials, login
commands, URL credentials, e-mails, user names in paths and private-key blocks that masking
replaces, and the small linear-time engine that applies them (:class:`MaskRule`).

Every pattern is RE2 (no backtracking) on UTF-8 bytes; a rule finds an *anchor* and reads a
value of unbounded length by one character-class run, so no byte is read twice. Host and IP
pseudonyms, which need per-job state, are :class:`~denpex_ml.logs.masking.Masker`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import re2

from denpex_ml.logs.patterns import contains

__all__ = ["DEFAULT_RULES", "KEY_MAX_LINES", "MaskRule", "mask_secrets"]

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
_B64 = re.compile(rb"[A-Za-z0-9+/=]{4,}")
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


class _Found:
    """A match on bytes with what the rules use of it (re2's own match object checks its
    arguments on every call: a third of the time of masking went there)."""

    __slots__ = ("_end", "_start", "string")

    def __init__(self, string: bytes, start: int, end: int) -> None:
        self.string = string
        self._start = start
        self._end = end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end

    def span(self) -> tuple[int, int]:
        return self._start, self._end

    def group(self) -> bytes:
        return self.string[self._start : self._end]


_UNANCHORED = re2._Anchor.UNANCHORED


def _finditer(regex: Any, data: bytes, pos: int = 0) -> Iterator[_Match]:
    """``regex.finditer(data, pos)`` for an RE2 pattern on bytes: the same matches, stepped
    through as re2's wrapper steps (an empty match moves on by one byte)."""
    native = getattr(regex, "_regexp", None)
    if native is None:  # pragma: no cover - every pattern given here is RE2
        yield from regex.finditer(data, pos)
        return
    match = native.Match
    endpos = len(data)
    pos = max(0, min(pos, endpos))
    while True:
        start, end = match(_UNANCHORED, data, pos, endpos)[0]
        if start == -1 and end == -1:
            return
        yield _Found(data, start, end)
        if pos == endpos:
            return
        pos = pos + 1 if pos == end else end


def _substitute(regex: Any, data: bytes, edit: EditFn) -> tuple[bytes, int]:
    """Apply ``edit`` to the successive matches of ``regex`` (one RE2 scan of ``data``).

    A match that starts inside text an earlier edit replaced or skipped is passed over. The
    matches are :func:`_finditer`'s, stepped through here without a generator (a search from
    ``where``; after an edit that read past its match, from where the edit stopped).
    """
    native = getattr(regex, "_regexp", None)
    if native is None:  # pragma: no cover - every pattern given here is RE2
        return _substitute_iter(regex, data, edit)
    match = native.Match
    endpos = len(data)
    out: list[bytes] = []
    last = pos = n = where = 0
    while True:
        start, end = match(_UNANCHORED, data, where, endpos)[0]
        if start == -1 and end == -1:
            break
        if start >= pos:
            r = edit(_Found(data, start, end), data)
            if isinstance(r, int):
                pos = r
            else:
                cut, pos, rep = r
                out.append(data[last:cut])
                out.append(rep)
                last = pos
                n += 1
            if pos > end:  # an edit read past the match: search on from there, not inside
                where = max(0, min(pos, endpos))
                continue
        if where == endpos:
            break
        where = where + 1 if where == end else end
    if not n:
        return data, 0
    out.append(data[last:])
    return b"".join(out), n


def _substitute_iter(regex: Any, data: bytes, edit: EditFn) -> tuple[bytes, int]:
    """:func:`_substitute` through :func:`_finditer` (the reference the test compares against)."""
    out: list[bytes] = []
    last = pos = n = 0
    matches = _finditer(regex, data)
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
            matches = _finditer(regex, data, pos)
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
    if not contains(b"PRIVATE KEY", data):
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
