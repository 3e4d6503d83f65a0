"""NCCL debug lines (``host:pid:tid [dev] NCCL ...``): their hosts, found in bulk.

NCCL prints thousands of debug lines behind the same process head; ingestion needs the host of
each only to learn it before masking (and, in a per-rank file, to give the line and its rank's
stream their host). Both readers here scan a whole block with RE2 and parse each distinct head
once.
"""

from __future__ import annotations

import re
from typing import Any

import re2

from denpex_ml.logs.masking import _IPV4_FULL, Masker
from denpex_ml.logs.patterns import NCCL_HOST
from denpex_ml.logs.prefixes import parse_prefix
from denpex_ml.logs.secret_rules import _UNANCHORED

__all__ = ["NCCL_SHAPE", "bare_nccl_hosts", "nccl_hosts", "nccl_hosts_of_lines"]

#: The start of a line that may be an NCCL debug line (the general parser decides).
NCCL_SHAPE = r"[\w.-]+:\d+:\d+ \[\d"
_NCCL_SHAPE_AT = re2.compile(NCCL_SHAPE.encode())  # matched anchored at a line's start
_ANCHOR_START = re2._Anchor.ANCHOR_START
_PREFIXED_NCCL_LINE = re2.compile(rb"(?m)^\[(?:rank|default)\d+\]: ?" + NCCL_SHAPE.encode())

_NCCL_HOST_IN_TEXT = re2.compile(("(" + NCCL_HOST + r"):\d+:\d+ \[\d+\] NCCL").encode())
_NCCL_HOST_SPAN = re2.compile((NCCL_HOST + r":\d+:\d+ \[\d+\] NCCL").encode())  # the same, no group
#: A head ``parse_prefix`` reads as an NCCL debug prefix whose host is the text before the first
#: colon, without being asked: a letter first (no timestamp can start there), the colon within
#: the first 256 characters (where the prefix parsers look for it), no space before it, ASCII
#: digits for the process, thread and device, and " NCCL" right after the device.
_PLAIN_HEAD = re.compile(rb"([A-Za-z][A-Za-z0-9_.-]{0,254}):[0-9]+:[0-9]+ \[[0-9]+\] NCCL")
#: A line head up to its last " NCCL" in which _NCCL_HOST_SPAN matches once, its host first: a
#: torchrun rank tag (which no match can start in: "]" ends every run of host characters there)
#: or nothing, then host:pid:tid [dev] NCCL.
_PLAIN_KEY = re.compile(
    rb"(?:\[(?:rank|default)[0-9]+\]: ?)?([A-Za-z0-9][A-Za-z0-9_.-]*):[0-9]+:[0-9]+ \[[0-9]+\] NCCL"
)


def bare_nccl_hosts(raw: bytes, masker: Masker) -> dict[int, str] | None:
    """Line index -> host pseudonym of each NCCL debug line at line start in a per-rank file's
    block, the hosts learned in line order as the general parser learns them; ``None`` when a
    line of that shape parses as another launcher prefix (then the general parser reads the block).
    A line of that shape that parses as no prefix is an ordinary line, as it is there.

    What ``parse_prefix`` makes of such a line depends only on its bytes up to its first
    " NCCL" (none: no prefix): a process prints thousands of lines behind the same head, each
    head is parsed once."""
    # Only a line holding " NCCL" can yield a host: each is found by memmem, from its start, and
    # asked whether it has the shape (anchored there) as the scan of the whole block would find it.
    match = _NCCL_SHAPE_AT._regexp.Match
    size = len(raw)
    parsed: dict[bytes, str] = {}  # head -> its host, or "" when the line is no NCCL prefix
    found: list[tuple[int, str]] = []
    line = 0
    last = 0
    cut = raw.find(b" NCCL")
    while cut >= 0:  # the first " NCCL" of its line
        start = raw.rfind(b"\n", 0, cut) + 1
        stop = raw.find(b"\n", cut)
        if stop < 0:
            stop = size
        if match(_ANCHOR_START, raw, start, stop)[0][0] == -1:
            cut = raw.find(b" NCCL", stop)
            continue  # not of the shape: an ordinary line
        head = raw[start : cut + 5]
        host = parsed.get(head)
        if host is None:
            plain = _PLAIN_HEAD.fullmatch(head)
            if plain is not None:  # what parse_prefix gives it, read off the head
                host = parsed[head] = plain.group(1).decode("ascii")
            else:
                p = parse_prefix(raw[start:stop].decode("utf-8", "replace"))
                if p is not None and (p.format != "nccl" or p.rank is not None or not p.host):
                    return None
                host = parsed[head] = p.host if p is not None and p.host else ""
        if host:
            line += raw.count(b"\n", last, start)
            last = start
            found.append((line, host))
        cut = raw.find(b" NCCL", stop)
    if found and (b"[rank" in raw or b"[default" in raw) and _PREFIXED_NCCL_LINE.search(raw):
        return None  # with bare ones, the general parser gives "[rankN]:host:..." lines their host too
    # one pseudonym per host name; an address is asked each time (each use is counted)
    names: dict[str, str] = {}
    out: dict[int, str] = {}
    for i, h in found:
        name = names.get(h)
        if name is None:
            name = masker.pseudonym(h)
            if not _IPV4_FULL.fullmatch(h) and ":" not in h:
                names[h] = name
        out[i] = name
    return out


def nccl_hosts(data: bytes) -> set[bytes]:
    """The distinct values of ``_NCCL_HOST_IN_TEXT.findall(data)``, stepped through as re2's wrapper
    steps, without its match objects and without submatches: the host is the match up to its
    first colon (it cannot hold one, and a colon follows it)."""
    # A match lies within one line and ends in " NCCL": only the lines holding that literal are
    # scanned (found by memmem), each from its start, as the scan of the whole block reaches it.
    # What a line yields depends only on its bytes up to its last " NCCL": a process prints
    # thousands of lines behind the same "[rankN]:host:pid:tid [dev] NCCL", read once each.
    match = _NCCL_HOST_SPAN._regexp.Match
    found: set[bytes] = set()
    seen: set[bytes] = set()
    hit = data.find(b" NCCL")
    while hit >= 0:
        pos = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        if end < 0:
            end = len(data)
        last = data.rfind(b" NCCL", hit, end) + 5
        key = data[pos:last]
        if key in seen:
            hit = data.find(b" NCCL", end)
            continue
        seen.add(key)
        plain = _PLAIN_KEY.fullmatch(key)
        if plain is not None:  # the one match there is: its host read off the key
            found.add(plain.group(1))
            hit = data.find(b" NCCL", end)
            continue
        end = last
        while True:
            start, stop = match(_UNANCHORED, data, pos, end)[0]
            if start == -1 and stop == -1:
                break
            found.add(data[start : data.index(b":", start)])
            if pos == end:
                break
            pos = pos + 1 if pos == stop else stop
        hit = data.find(b" NCCL", end)
    return found


#: _PLAIN_KEY on each line of newline-joined keys (no key holds a newline)
_PLAIN_KEY_AT_LINE = re.compile(rb"(?m)^" + _PLAIN_KEY.pattern + rb"$")


def nccl_hosts_of_lines(data: bytes, starts: Any, ends: Any) -> set[bytes]:
    """:func:`nccl_hosts` of ``data``, whose lines start at ``starts`` and end (their newline) at
    ``ends`` (a :class:`~denpex_ml.logs.columnar.LineTable`'s): every " NCCL" is found by numpy,
    each line's key (up to its last " NCCL") is cut, and one ``findall`` over the keys gives the
    hosts when every key is plain (one host each); else :func:`nccl_hosts` itself."""
    import numpy as np

    d = np.frombuffer(data, dtype=np.uint8)
    at = np.flatnonzero(d[1:-3] == 78)  # "N", then the rest of " NCCL" around it
    at = at[(d[at] == 32) & (d[at + 2] == 67) & (d[at + 3] == 67) & (d[at + 4] == 76)]  # where " NCCL" starts
    if not len(at):
        return set()
    line = np.searchsorted(ends, at)
    if line[-1] >= len(ends):  # after the last newline
        return nccl_hosts(data)
    last = np.flatnonzero(np.append(line[1:] != line[:-1], True))  # each line's last " NCCL"
    keys = [data[a:b] for a, b in zip(starts[line[last]].tolist(), (at[last] + 5).tolist(), strict=True)]
    hosts = _PLAIN_KEY_AT_LINE.findall(b"\n".join(keys))
    if len(hosts) != len(keys):  # a key that is not plain: the line's matches one by one
        return nccl_hosts(data)
    return set(hosts)
