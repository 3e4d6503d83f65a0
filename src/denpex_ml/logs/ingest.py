"""Ingestion: any log source -> masked lines split per rank, in one streaming pass.

Every byte goes through the same pipeline, in order: decode (UTF-8 with replacement, UTF-16
with BOM) -> normalise (NUL, ANSI, carriage-return progress bars, line-length cap) -> mask
(secrets, e-mails, user names, IPs, hostnames to pseudonyms) -> parse launcher prefixes ->
assign a stream (global rank, host, or ``global``) -> retain a bounded set of lines.
Nothing downstream ever sees unmasked text.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import zlib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from denpex_ml.errors import ArchiveError, DenpexError, InvalidInputError, NotALogError
from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, LogLine, RankLog, StreamKey
from denpex_ml.logs.launcher import LauncherParser
from denpex_ml.logs.limits import IngestLimits, Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.normalize import TRUNCATION_MARK, iter_text_blocks
from denpex_ml.logs.prefixes import discover_hosts, message_rank, parse_prefix, rank_from_path
from denpex_ml.logs.sources import Member, ReadBudget, iter_members, opened

__all__ = ["LogSource", "read_logs"]

LogSource = str | os.PathLike[str] | Mapping[int | str, str]

SALIENT = re.compile(
    r"[Ee]rror|ERROR|[Ee]xception|Traceback|[Ff]ail|FAIL|[Ff]atal|FATAL|[Aa]bort|[Tt]ime(?:d )?out|[Kk]illed|"
    r"[Ss]ignal|SIG[A-Z]{3}|WARN|[Ww]arning|\bnan\b|NaN|\binf\b|[Ss]egmentation|core dump|Xid|[Aa]ssert|"
    r"terminate|[Dd]enied|No such file|not found|[Rr]efused|reset by peer|out of memory|OOM|[Ee]xit ?code|"
    r"[Hh]ang|[Ss]tuck|[Mm]ismatch|[Ii]llegal|[Ii]nvalid|[Cc]annot|[Uu]nable|[Oo]verflow|[Ss]kipping|"
    r"^\s*File \"|--[a-z][\w-]+|\.{4,} |SeqNum|[Dd]eadlock|[Ww]atchdog|NCCL version|[Ll]oss scale|"
    r"[Uu]nrecognized|[Uu]ndefined symbol|[Ee]xpected|[Mm]issing|[Cc]rash|[Dd]ied|[Ee]xited|[Ss]hutdown"
)
_TEMPLATE = re.compile(r"0x[0-9a-fA-F]+|\d+")
_NCCL_COMM_RANK = re.compile(r"\brank (\d+) nranks (\d+)\b")


@dataclass
class _Stream:
    head: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    tail: deque[tuple[str, int, str, str | None, bool]] = field(default_factory=deque)
    salient: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    templates: dict[str, int] = field(default_factory=dict)
    n_lines: int = 0
    n_salient: int = 0
    hosts: set[str] = field(default_factory=set)


class _Builder:
    """Assigns lines to streams and keeps a bounded sample of each."""

    def __init__(self, retention: Retention) -> None:
        self.ret = retention
        self.streams: dict[StreamKey, _Stream] = {}
        self.pid_rank: dict[str, int] = {}
        self.launcher = LauncherParser()
        self.bundle = LogBundle()

    def _stream(self, key: StreamKey) -> _Stream:
        st = self.streams.get(key)
        if st is None:
            if len(self.streams) >= self.ret.max_streams:
                key = "overflow"
                st = self.streams.get(key)
                if st is not None:
                    return st
            st = self.streams[key] = _Stream(tail=deque(maxlen=self.ret.tail))
        return st

    def add_block(self, block: str, source: str, file_rank: int | None, lineno: int) -> int:
        formats = self.bundle.formats
        for line in block.split("\n"):
            lineno += 1
            if not line or line.isspace():
                continue
            self.bundle.n_lines += 1
            rank: int | None = None
            host: str | None = None
            key: StreamKey
            p = parse_prefix(line)
            text = line
            if p is not None:
                formats[p.format] += 1
                text = p.rest
                rank = p.rank
                host = p.host
                if p.format == "nccl" or (p.pid is not None and " NCCL " in text):
                    pid_key = f"{p.host}:pid{p.pid}"
                    if "nranks" in text:
                        m = _NCCL_COMM_RANK.search(text)
                        if m and pid_key not in self.pid_rank:
                            self.pid_rank[pid_key] = int(m.group(1))
                    if rank is None:
                        rank = self.pid_rank.get(pid_key)
                    if rank is None and file_rank is None:
                        key = pid_key
                        self._keep(key, source, lineno, text, host)
                        continue
                elif p.pid is not None and rank is None and file_rank is None:
                    key = f"{p.host}:pid{p.pid}" if p.host else f"pid{p.pid}"
                    rank = message_rank(text)
                    self._keep(rank if rank is not None else key, source, lineno, text, host)
                    continue
            if rank is None:
                rank = file_rank
            if rank is None:
                rank = message_rank(text)
            if rank is not None:
                key = rank
            elif host is not None:
                key = host
            else:
                key = GLOBAL_STREAM
            if TRUNCATION_MARK in text:
                self.bundle.n_truncated_lines += 1
            self._keep(key, source, lineno, text, host)
        return lineno

    def _keep(self, key: StreamKey, source: str, lineno: int, text: str, host: str | None) -> None:
        st = self._stream(key)
        st.n_lines += 1
        if host is not None and host not in st.hosts:
            st.hosts.add(host)
        if "Root Cause" in text or "Failures:" in text or self.launcher._section is not None:
            self.launcher.feed(text)
        salient = SALIENT.search(text) is not None
        item = (source, lineno, text, host, salient)
        if st.n_lines <= self.ret.head:
            st.head.append(item)
            if salient:
                st.n_salient += 1
            return
        if salient:
            st.n_salient += 1
            if len(st.salient) < self.ret.salient * (4 if key == GLOBAL_STREAM else 1):
                tpl = _TEMPLATE.sub("#", text)
                seen = st.templates.get(tpl, 0)
                st.templates[tpl] = seen + 1
                if seen < self.ret.per_template:
                    st.salient.append(item)
        st.tail.append(item)

    def finish(self, masker: Masker) -> LogBundle:
        # Streams named by NCCL host:pid whose global rank became known later are merged in.
        for key in [k for k in self.streams if isinstance(k, str) and k in self.pid_rank]:
            src = self.streams.pop(key)
            dst = self._stream(self.pid_rank[key])
            dst.head.extend(src.head)
            dst.salient.extend(src.salient)
            dst.tail.extend(src.tail)
            dst.n_lines += src.n_lines
            dst.n_salient += src.n_salient
            dst.hosts |= src.hosts
        bundle = self.bundle
        for key, st in self.streams.items():
            seen: set[tuple[str, int]] = set()
            lines: list[LogLine] = []
            for source, lineno, text, host, salient in (*st.head, *st.salient, *st.tail):
                ident = (source, lineno)
                if ident in seen:
                    continue
                seen.add(ident)
                lines.append(LogLine(key, source, lineno, text, host, salient))
            order = {s: i for i, s in enumerate(bundle.sources)}
            lines.sort(key=lambda ln: (order.get(ln.source, 0), ln.lineno))
            bundle.streams[key] = RankLog(key, lines, st.n_lines, st.n_salient, st.hosts)
        bundle.launcher = self.launcher.summary
        bundle.masked = dict(masker.counts)
        bundle.n_hosts = masker.n_hosts
        return bundle


def _ingest_stream(builder: _Builder, masker: Masker, stream: io.BufferedIOBase | io.RawIOBase, name: str, limits: IngestLimits) -> None:
    file_rank = rank_from_path(name)
    builder.bundle.sources.append(name)
    lineno = 0
    try:
        for block in iter_text_blocks(stream, name=name, max_line_chars=limits.max_line_chars):  # type: ignore[arg-type]
            builder.bundle.n_bytes += len(block)
            hosts = discover_hosts(block)
            if hosts:
                masker.learn_hosts(hosts)
            lineno = builder.add_block(masker.mask(block), name, file_rank, lineno)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{name}: corrupt or truncated compressed data ({exc})") from None
    except OSError as exc:
        if isinstance(exc, DenpexError):
            raise
        raise ArchiveError(f"{name}: read failed ({exc})") from None


def _mapping_items(source: Mapping[int | str, str]) -> Iterable[tuple[str, str]]:
    for key, value in source.items():
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        if not isinstance(value, str):
            raise InvalidInputError(f"log mapping: value of {key!r} must be str, got {type(value).__name__}")
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise InvalidInputError(f"log mapping: key {key!r} must be a rank (int) or a file name (str)")
        if isinstance(key, int):
            if key < 0:
                raise InvalidInputError(f"log mapping: rank {key} must be >= 0")
            yield f"rank{key}", value
        elif key.isdigit():
            yield f"rank{int(key)}", value
        else:
            yield key, value


def read_logs(
    source: LogSource | None = None,
    *,
    text: str | None = None,
    limits: IngestLimits | None = None,
    retention: Retention | None = None,
    masker: Masker | None = None,
) -> LogBundle:
    """Read one job's logs and split them per rank.

    Parameters
    ----------
    source:
        A log file (plain or .gz), a directory of per-rank files (read recursively), an
        archive (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz, .zip), or a mapping
        ``rank or file name -> text``.
    text:
        Raw log text, instead of ``source``.
    limits, retention:
        Safety limits and how many lines per rank are kept (see their docs).
    masker:
        Masking rules; a new :class:`Masker` (fresh pseudonyms) by default.

    Returns
    -------
    LogBundle
        Masked, retained lines per stream. An empty input gives an empty bundle.

    Raises
    ------
    LogNotFoundError, NotALogError, ArchiveError, UnsafeArchiveMemberError, InputTooLargeError, InvalidInputError

    Examples
    --------
    >>> b = read_logs(text="[rank1]: RuntimeError: boom\\n[rank0]: step 3 loss 1.2\\n")
    >>> b.ranks
    [0, 1]
    """
    if (source is None) == (text is None):
        raise InvalidInputError("read_logs: give exactly one of `source` or `text`")
    limits = limits or IngestLimits()
    masker = masker or Masker()
    builder = _Builder(retention or Retention())
    if text is not None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if not isinstance(text, str):
            raise InvalidInputError(f"read_logs: text must be str, got {type(text).__name__}")
        _ingest_stream(builder, masker, io.BytesIO(text.encode("utf-8", errors="replace")), "<text>", limits)
        return builder.finish(masker)
    if isinstance(source, Mapping):
        for name, value in _mapping_items(source):
            _ingest_stream(builder, masker, io.BytesIO(value.encode("utf-8", errors="replace")), name, limits)
        return builder.finish(masker)
    if not isinstance(source, (str, os.PathLike)):
        raise InvalidInputError(
            f"read_logs: source must be a path, a mapping rank -> text, or text=...; got {type(source).__name__}"
        )
    path = Path(source)
    budget = ReadBudget(limits, str(path))
    members: list[Member] = []
    binaries: list[str] = []
    single_file = path.is_file()
    for member in iter_members(path, limits, budget):
        members.append(member)
        try:
            with opened(member) as stream:
                _ingest_stream(builder, masker, stream, member.name, limits)  # type: ignore[arg-type]
        except NotALogError:
            if single_file and not _is_archive_name(path):
                raise
            binaries.append(member.name)
            builder.bundle.sources.remove(member.name)
            budget.warnings.append(f"skipped {member.name}: binary content, not a log")
    if binaries and len(binaries) == len(members):
        raise NotALogError(f"{path}: no text log among {len(members)} file(s) (all binary)")
    bundle = builder.finish(masker)
    bundle.warnings.extend(budget.warnings)
    return bundle


def _is_archive_name(path: Path) -> bool:
    return path.name.lower().endswith((".tar", ".tgz", ".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tbz2", ".txz"))
