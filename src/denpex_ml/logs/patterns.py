"""Named regular-expression fragments that several readers of log lines share.

Each fragment is a pattern *string* (no groups of its own, so it can be embedded anywhere,
in ``re`` or RE2, as text or encoded to bytes); the modules that use one compile it into
their own expressions. A format seen in a new log is taught here once, not in every reader. :func:`template`, the
one line template (variable parts replaced by placeholders) that line selection, retrieval and
the line bank key on, lives here too.

>>> import re
>>> bool(re.fullmatch(ISO_TIMESTAMP, "2024-04-19T10:42:28.858+02:00"))
True
>>> bool(re.fullmatch(SYSLOG_TIMESTAMP, "Apr  9 10:42:28"))
True
>>> bool(re.fullmatch(HOSTNAME, "gpu-a17")), bool(re.fullmatch(HOSTNAME, "main"))
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import re2

__all__ = [
    "CTIME_TIMESTAMP",
    "GLOG_ERROR",
    "HOSTNAME",
    "HOST_PREFIX",
    "HOST_PREFIX_SCREEN",
    "ISO_TIMESTAMP",
    "ISO_TS_PREFIX",
    "NCCL_COMM",
    "NCCL_HOST",
    "NOT_FAST_PATTERN",
    "RANK_TAG",
    "SALIENT_PATTERN",
    "SYSLOG_LINE_TIME",
    "SYSLOG_TIMESTAMP",
    "AsciiScreen",
    "ascii_screen_source",
    "contains",
    "required_literals",
    "retention_templates",
    "template",
    "templates",
]

#: an ISO-8601 date and time, with optional fraction and zone (``2024-04-19 10:42:31,123``, ``...T...Z``)
ISO_TIMESTAMP = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
#: an ISO-8601 timestamp that starts a line, with the separator after it (``[2024-04-19 10:42:31,123] ``)
ISO_TS_PREFIX = r"\[?" + ISO_TIMESTAMP + r"\]?:?[ \t]+"
#: a syslog timestamp without a year (``Apr 19 10:42:28``, ``Apr  9 10:42:28``)
SYSLOG_TIMESTAMP = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d"
#: the time that starts a syslog / ``journalctl`` line before its host field (classic or ISO ``-o short-iso``)
SYSLOG_LINE_TIME = r"(?:" + SYSLOG_TIMESTAMP + r"(?:\.\d+)?|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[0-9.,:+-]*Z?)"
#: a ctime timestamp (``mpirun --timestamp-output``: ``Fri Apr 19 10:42:28 2024``)
CTIME_TIMESTAMP = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"

#: a torchrun ``--tee``/``--log-line-prefix`` rank tag that starts a line (``[rank3]: ``, ``[default0]:``)
RANK_TAG = r"\[(?:rank|default)\d+\]:[ ]?"

#: a host name as clusters write them: a letter first, and a digit or ``-`` in it (``gpu-a17``,
#: ``node017``; ``main`` and ``localhost`` are no hosts)
HOSTNAME = r"[A-Za-z][A-Za-z0-9_-]*[0-9-][A-Za-z0-9_.-]*"
#: the host of a pdsh / DeepSpeed / ``mpirun --tag-output`` line prefix (before ``": "``): an IPv4
#: address, ``ip-N``, a name with a digit before its first dot, or a hyphenated name. Possessive
#: runs (never given back) keep a long name without ``": "`` linear, not quadratic (``re`` only).
HOST_PREFIX = (
    r"(?:\d{1,3}(?:\.\d{1,3}){3})|ip-\d+|(?:[A-Za-z](?:[^\W\d]|-)*+\d[\w.-]*+)"
    r"|(?:[a-z][a-z0-9]*+(?:-[a-z0-9]++)++(?:\.[\w-]++)*+)"
)
#: the same for RE2 screens (no possessive runs): it matches every :data:`HOST_PREFIX` and a little more
HOST_PREFIX_SCREEN = r"\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w-]*\d[\w.-]*|[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[\w-]+)*"
#: the host of an NCCL debug line (``gpu-a17:1234:1290 [3] NCCL INFO ...``)
NCCL_HOST = r"[A-Za-z0-9][\w.-]*"
#: NCCL's summary of a communicator it set up, as every rank prints it: ``comm 0x… rank R nranks N
#: cudaDev D [nvmlDev G] busId B`` (groups: rank, nranks, cudaDev, nvmlDev, busId)
NCCL_COMM = r"\bcomm 0x[0-9a-fA-F]+ rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))? busId ([0-9a-fA-F:.]+)"

#: glog's ERROR or FATAL level (``E0410 21:04:57.403295  30715 file.cc:77]``, TensorFlow's
#: ``E tensorflow/core/...cc:352]``) and PyTorch's c10 logging of the same levels, which prints no
#: thread id and no leading zero in the month (``[E429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743]``),
#: after a word boundary; ASCII classes, so that Python's ``re`` and RE2 read it alike
GLOG_ERROR = r"[EF](?:[0-9]{3,4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+(?:[ \t]+[0-9]+)?)? \S+\.(?:cc|cpp|h|cu|c):[0-9]+\]"

#: a line worth keeping beyond a stream's head and tail (errors, warnings, hang-analysis marks)
SALIENT_PATTERN = (
    r"[Ee]rror|ERROR|[Ee]xception|Traceback|[Ff]ail|FAIL|[Ff]atal|FATAL|[Aa]bort|[Tt]ime(?:d )?out|[Kk]illed|"
    r"[Ss]ignal|SIG[A-Z]{3}|WARN|[Ww]arning|\bnan\b|NaN|\binf\b|[Ss]egmentation|core dump|Xid|[Aa]ssert|"
    r"terminate|[Dd]enied|No such file|not found|[Rr]efused|reset by peer|out of memory|OOM|[Ee]xit ?code|"
    r"[Hh]ang|[Ss]tuck|[Mm]ismatch|[Ii]llegal|[Ii]nvalid|[Cc]annot|[Uu]nable|[Oo]verflow|[Ss]kipping|"
    r"File \"|--[a-z][\w-]+|\.{4,} |SeqNum|[Dd]eadlock|[Ww]atchdog|NCCL version|[Ll]oss scale (?:reduced|to|already)|[Rr]educing loss scale|"
    r"[Uu]nrecognized|[Uu]ndefined symbol|[Ee]xpected|[Mm]issing|[Cc]rash|[Dd]ied|[Ee]xited|[Ss]hutdown|"
    # hang analysis: py-spy frames and thread headers, phase boundaries (save, eval, tokenise, end)
    r"\.py:\d+\)|Thread (?:0x[0-9a-fA-F]+|\d+) \(|[Ss]aving (?:model )?checkpoint|Running (?:Evaluation|tokenizer)|"
    r"[Tt]raining (?:completed|finished)|train_runtime|CANCELLED AT|[Pp]reempt|KeyboardInterrupt|death signal|nranks|"
    # other stacks' failure words: kernels' TIMEOUT, TF1's "Caused by op", UCX's crash backtrace,
    # TF's allocator dump on a failed allocation, EAGAIN, TLS and scheduler credentials
    r"TIMEOUT|Caused by op|==== backtrace|Sum Total of in-use chunks|Total bytes in pool|"
    r"Resource temporarily unavailable|[Cc]ertificate|[Cc]redential|segfault|nan loss|NaN loss|peer access|"
    r"retry count exceeded|GID is NULL|已杀死|\blua(?:jit)?: |stack traceback:|\b" + GLOG_ERROR + "|"
    # NCCL's error trace: each caller of a failed call logs ``file.cc:line -> code`` (code > 0)
    r"\.(?:cc|cu):\d+ -> [1-9]"
)
#: (RE2) a line that needs ingestion's general parser: other launcher prefixes, NCCL debug or host
#: prefixes at line start, launcher summaries (parsed in order), syslog timestamps
NOT_FAST_PATTERN = (
    r"(?m)^(?:" + ISO_TS_PREFIX + r")?(?:\[(?:\d+,)?\d+\]<std|\{|\(\w+ pid=|\[[\w.-]+:\d+ *:\d|[ ]{0,5}\d{1,6}: |"
    r"[\w.-]+:\d+:\d+ \[\d|(?:"
    + HOST_PREFIX_SCREEN
    + r"): |"
    + RANK_TAG
    + r"(?:\[(?:rank|default)\d|\[(?:\d+,)?\d+\]<|\[[\w.-]+:\d+ *:\d|\(\w+ pid=|\{|"
    r"(?:" + HOST_PREFIX_SCREEN + r"): )|[A-Z][a-z]{2} [ \d]\d \d\d:"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:)"
    r"|Root Cause \(first observed failure\)|^\s*Failures:"
)


_SCREEN_OPTIONS = re2.Options()
_SCREEN_OPTIONS.log_errors = False
_BYTE_OPTIONS = re2.Options()  # each byte a character: any input, valid UTF-8 or not
_BYTE_OPTIONS.log_errors = False
_BYTE_OPTIONS.encoding = re2.Options.Encoding.LATIN1
_SCREEN_UNANCHORED = re2._Anchor.UNANCHORED


# -- the line template ------------------------------------------------------------------------
_GLOG_HEADER = re.compile(r"^\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d\.\d+ +(?:\d+ )?[\w.-]+:\d+\] ?")
_LEADING_TS = re.compile(r"^\[?" + ISO_TIMESTAMP + r"\]?[ \t]*|^" + SYSLOG_TIMESTAMP + " ")
#: (substring that must be present, pattern, replacement): the substring test skips most
#: regex calls on most lines.
_TEMPLATE_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("0x", re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    ("-", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    ("node-", re.compile(r"\bnode-\d+\b"), "<node>"),
    ("ip-", re.compile(r"\bip-\d+\b"), "<ip>"),
    ("/", re.compile(r"(?:/[\w.@+-]+){2,}/([\w.@+-]+)"), r"<path>/\1"),
    ("", re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)
_SPACES = re.compile(r"[ \t]+")


def template(text: str) -> str:
    """A line with its variable parts replaced by placeholders.

    >>> template("[E419 10:42:28.858931807 ProcessGroupNCCL.cpp:616] [Rank 3] ran for 600011 ms on node-2")
    '[Rank <n>] ran for <n> ms on <node>'
    """
    return _template(text, _TEMPLATE_RULES)


def _template(text: str, rules: tuple[tuple[str, re.Pattern[str], str], ...]) -> str:
    for rx in (_LEADING_TS, _GLOG_HEADER):
        m = rx.match(text)
        if m:
            text = text[m.end() :]
    for needle, rx, repl in rules:
        if needle in text:
            text = rx.sub(repl, text)
    if "  " in text or "\t" in text:
        text = _SPACES.sub(" ", text)
    return text.strip()[:400]


#: RE2 on UTF-8 bytes, matching in a line wherever the uuid rule (resp. the path rule) could match
#: in its text as the rules before it leave it: those rules only cut a leading prefix or put
#: "<...>" tokens in, and neither rule's match can hold a "<" or ">", so such a match lies in the
#: line's own text; the screens drop the word boundaries and read the path's runs as any bytes
#: but "/" and newlines.
_UUID_SCREEN = b"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_PATH_SCREEN = b"/[^/\n]+/[^/\n]+/[^/\n]"
_UUID_RULE = next(i for i, (_, _, repl) in enumerate(_TEMPLATE_RULES) if repl == "<uuid>")
_PATH_RULE = next(i for i, (_, _, repl) in enumerate(_TEMPLATE_RULES) if repl.startswith("<path>"))
#: the template rules without the uuid rule, without the path rule, without both
_RULES_WITHOUT: dict[tuple[bool, bool], tuple[tuple[str, re.Pattern[str], str], ...]] = {
    (uuid, path): tuple(
        r for i, r in enumerate(_TEMPLATE_RULES) if (i != _UUID_RULE or uuid) and (i != _PATH_RULE or path)
    )
    for uuid in (False, True)
    for path in (False, True)
}
_LINES_SCREENS: dict[bytes, Any] = {}


def _screened_lines(pattern: bytes, data: bytes) -> set[int]:
    """Indices of the lines of ``data`` (joined by newlines) in which the RE2 ``pattern`` (which
    matches no newline) starts a match: one scan, the next line searched after each match's line."""
    rx = _LINES_SCREENS.get(pattern)
    if rx is None:
        rx = re2.compile(b"(?:" + pattern + b")[^\n]*", options=_BYTE_OPTIONS)._regexp.Match
        _LINES_SCREENS[pattern] = rx
    found: set[int] = set()
    size = len(data)
    line = pos = last = 0
    while pos < size:
        start, stop = rx(_SCREEN_UNANCHORED, data, pos, size)[0]
        if start == -1:
            break
        line += data.count(b"\n", last, start)
        last = start
        found.add(line)
        pos = stop + 1
    return found


#: ASCII digits 1-9 -> "1" (bytes.translate): a line's template depends on where its ASCII digits
#: are and where its zeros are (the hex rule's "0x"), not on which other digits they are. Every
#: rule reads 1-9 alike (``\\d``, ``[0-9a-f]``, ``\\w`` and ``\\b`` hold all of them, no pattern names
#: one), no rule's output holds a digit, and the number rule replaces every digit the earlier rules
#: leave: two lines that differ only in which of 1-9 their ASCII digits are have the same template
#: (other digits, e.g. Arabic-Indic, stay).
_DIGITS_TO_ONE = bytes.maketrans(b"23456789", b"11111111")
#: how many lines a :class:`DigitShapeCache` keeps before it starts again
TEMPLATE_CACHE_LINES = 10_000


class DigitShapeCache:
    """The results of a pure per-line function that depends on where a line's ASCII digits and
    zeros are, not on which of 1-9 they are (see ``_DIGITS_TO_ONE``; a line template is such a
    function), kept across calls by the line's digit-masked UTF-8 bytes. A pure function: the
    cache changes no answer; it is emptied when it would hold more than ``max_lines`` lines."""

    def __init__(self, max_lines: int = TEMPLATE_CACHE_LINES) -> None:
        self.max_lines = max_lines
        self._known: dict[bytes, str] = {}

    def map(self, texts: Sequence[str], data: bytes, make: Callable[[int, str], str]) -> list[str]:
        """``[make(i, t) for i, t in enumerate(texts)]``, ``make`` called once per line shape not
        known yet; ``data`` is the texts joined by newlines, UTF-8 (surrogatepass) encoded."""
        known = self._known
        if len(known) + len(texts) > self.max_lines:
            known.clear()
        out: list[str] = []
        for i, (text, key) in enumerate(zip(texts, data.translate(_DIGITS_TO_ONE).split(b"\n"), strict=True)):
            value = known.get(key)
            if value is None:
                value = known[key] = make(i, text)
            out.append(value)
        return out


_TEMPLATES = DigitShapeCache()


def templates(texts: Sequence[str]) -> list[str]:
    """``[template(t) for t in texts]``, each distinct digit-masked line (:class:`DigitShapeCache`)
    made once (a training loop's lines differ mostly in their numbers), and the two rules that
    rarely apply (uuids, paths) tried only on the lines that RE2 finds might hold one, by one scan
    over all the lines.

    >>> templates(["id 0123abcd-0000-1111-2222-333344445555 at /a/b/c.py:3", "step 7", "step 8"])
    ['id <uuid> at <path>/c.py:<n>', 'step <n>', 'step <n>']
    """
    joined = "\n".join(texts)
    if len(texts) < 2 or joined.count("\n") != len(texts) - 1:  # a text holding a newline
        return [template(t) for t in texts]
    data = joined.encode("utf-8", "surrogatepass")
    screens: list[set[int]] = []

    def make(i: int, text: str) -> str:
        if not screens:  # the screens, once, when a line is not known already
            screens.append(_screened_lines(_UUID_SCREEN, data))
            screens.append(_screened_lines(_PATH_SCREEN, data) if "/" in joined else set())
        return _template(text, _RULES_WITHOUT[i in screens[0], i in screens[1]])

    return _TEMPLATES.map(texts, data, make)


_TEMPLATE = re.compile(r"0x[0-9a-fA-F]+|\d+")
#: retention templates (``_TEMPLATE.sub("#", line)``) by line shape, across jobs: no digit survives
#: the substitution, so it depends on where a line's digits and zeros are only
_RETENTION_TEMPLATES = DigitShapeCache()


def retention_templates(texts: list[str]) -> list[str]:
    """``[_TEMPLATE.sub("#", t) for t in texts]`` (the texts hold no newline), through the cache."""
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:  # pragma: no cover - a line holds no newline
        return [_TEMPLATE.sub("#", t) for t in texts]
    data = joined.encode("utf-8", "surrogatepass")
    return _RETENTION_TEMPLATES.map(texts, data, lambda _i, text: _TEMPLATE.sub("#", text))


# -- RE2 screens of Python patterns on ASCII text -----------------------------------------------
#: what Python's ``\s`` matches in ASCII text (RE2's ``\s`` lacks \v and \x1c-\x1f)
_ASCII_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f "


def ascii_screen_source(pattern: str, flags: int = 0) -> str | None:
    r"""RE2 source that matches, in ASCII text, wherever the Python ``pattern`` (with ``flags``)
    does, or more; ``None`` when the pattern or a flag has no such reading (verbose patterns).

    On ASCII text RE2 and Python read every construct here alike (``\w``, ``\d``, ``\b`` and
    case folding are ASCII's in both) but ``\s``, which is written out; constructs RE2 lacks
    (look-arounds, back-references) make the compilation fail, and the caller does without.

    >>> print(ascii_screen_source(r"a\s+[\sb]", re.IGNORECASE))
    (?i)a[\t\n\x0b\x0c\r\x1c-\x1f ]+[\t\n\x0b\x0c\r\x1c-\x1f b]
    """
    if flags & re.VERBOSE or "{," in pattern:  # RE2 reads "{,n}" as text, Python as "{0,n}"
        return None
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "s":
                out.append(_ASCII_SPACE if in_class else f"[{_ASCII_SPACE}]")
            else:
                out.append(c + e)
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":  # a "]" first in a class is a literal
                j += 1
            out.append(pattern[i:j])
            i = j
            continue
        out.append(c)
        i += 1
    prefix = "".join(f for flag, f in ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s")) if flags & flag)
    return (f"(?{prefix})" if prefix else "") + "".join(out)


class AsciiScreen:
    """``rx.search(text) is not None`` for a Python pattern ``rx``, with ASCII text of one line first
    read by an RE2 version of it (:func:`ascii_screen_source`): where RE2 finds nothing, nothing is
    there (Python's ``re`` is slow to say so: an alternation without a literal prefix, or
    case-insensitive, is tried at every position); ``rx`` decides on the rest. (Text holding a
    newline goes to ``rx``: Python's ``$`` also matches before a final newline, RE2's does not.)

    >>> AsciiScreen(re.compile(r"fsdp|moe", re.IGNORECASE)).search("MoE layer")
    True
    """

    __slots__ = ("_match", "rx")

    def __init__(self, rx: re.Pattern[str]) -> None:
        self.rx = rx
        self._match: Any = None
        source = ascii_screen_source(rx.pattern, rx.flags)
        if source is not None:
            try:
                self._match = re2.compile(source.encode("ascii"), options=_SCREEN_OPTIONS)._regexp.Match
            except (re2.error, UnicodeEncodeError):
                self._match = None

    def search(self, text: str) -> bool:
        match = self._match
        if match is not None and text.isascii() and "\n" not in text:
            data = text.encode("ascii")
            if match(_SCREEN_UNANCHORED, data, 0, len(data))[0][0] == -1:
                return False
        return self.rx.search(text) is not None


def required_literals(rx: re.Pattern[str]) -> tuple[str, ...] | None:
    r"""Literals of which every match of ``rx`` holds one: for each top-level alternative, its longest
    run of literal characters (3 or more); ``None`` when an alternative has none, or the pattern
    ignores case. Text holding none of them cannot match, and ``in`` says so at C speed.

    >>> required_literals(re.compile(r"Fatal Python error: (?!Aborted)\w|^srun: error:", re.MULTILINE))
    ('Fatal Python error: ', 'srun: error:')
    """
    import importlib

    c: Any = importlib.import_module("re._constants")  # the parser re compiles with (Python >= 3.11)
    try:
        parsed = importlib.import_module("re._parser").parse(rx.pattern, rx.flags)
    except (re.error, RecursionError):  # pragma: no cover - it compiled
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    items = list(parsed)
    branches = items[0][1][1] if len(items) == 1 and items[0][0] is c.BRANCH else [items]
    found: list[str] = []
    for branch in branches:
        best = ""
        run: list[str] = []
        for op, arg in [*branch, (None, None)]:
            if op is c.LITERAL:
                run.append(chr(arg))
                continue
            if len(run) > len(best):
                best = "".join(run)
            run = []
        if len(best) < 3:
            return None
        found.append(best)
    return tuple(found)


_LITERAL_OPTIONS = re2.Options()
_LITERAL_OPTIONS.encoding = re2.Options.Encoding.LATIN1  # a byte is a character: any bytes, as given
_LITERAL_OPTIONS.literal = True
_LITERALS: dict[bytes, Any] = {}
_UNANCHORED = re2._Anchor.UNANCHORED


def contains(literal: bytes, data: bytes) -> bool:
    """``literal in data``, by RE2: it skips to each place where the literal's first byte stands
    (memchr), where bytes' own search reads every byte (~0.6 ms a MiB for ``b"Failures:"``, 0.02 by
    RE2). For literals whose first byte is rare in logs (not a space or a common letter)."""
    rx = _LITERALS.get(literal)
    if rx is None:
        rx = _LITERALS[literal] = re2.compile(literal, options=_LITERAL_OPTIONS)._regexp.Match
    return bool(rx(_UNANCHORED, data, 0, len(data))[0][0] != -1)
