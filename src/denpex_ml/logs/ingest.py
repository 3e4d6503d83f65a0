"""Ingestion: one file's bytes -> masked lines split per rank, in one streaming pass.

Every byte goes through the same pipeline, in order: decode (UTF-8 with replacement, UTF-16
with BOM) -> normalise (NUL, ANSI, carriage-return progress bars, line-length cap) -> mask
(secrets, e-mails, user names, IPs, hostnames to pseudonyms) -> parse launcher prefixes ->
assign a stream (global rank, host, or ``global``) -> retain a bounded set of lines.
Nothing downstream ever sees unmasked text. :func:`ingest_stream` feeds one member's blocks
to a :class:`Builder` (the fast, columnar and general paths); which members a job has, and
how they are opened, is :mod:`denpex_ml.logs.readers`' concern.
"""

from __future__ import annotations

import gzip
import io
import re
import tarfile
import zipfile
import zlib
from collections import deque

import re2

from denpex_ml.errors import (
    ArchiveError,
    DenpexError,
)
from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, LogLine, RankLog, StreamKey
from denpex_ml.logs.columnar import Block, StreamRetention, line_indices
from denpex_ml.logs.columnar_builder import NOT_FAST_B, ColumnarBuilder
from denpex_ml.logs.launcher import LauncherParser
from denpex_ml.logs.limits import IngestLimits, Retention
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.nccl_lines import NCCL_SHAPE, bare_nccl_hosts
from denpex_ml.logs.normalize import TRUNCATION_MARK, collapse_cr, iter_blocks
from denpex_ml.logs.patterns import (
    ISO_TS_PREFIX,
    NOT_FAST_PATTERN,
    SALIENT_PATTERN,
    contains,
    required_literals,
)
from denpex_ml.logs.prefixes import may_name_rank, message_rank, parse_prefix, rank_from_path
from denpex_ml.logs.system import (
    HARDWARE_LINE,
    MAX_SYSTEM_LINES,
    SystemLine,
    host_from_name,
    syslog_hosts,
)

__all__ = ["Builder", "ingest_stream"]

SALIENT = re2.compile(SALIENT_PATTERN.encode())


#: Largest Flight Recorder dump read (bytes); larger ones are skipped with a warning.
_NCCL_COMM_RANK = re.compile(r"\brank (\d+) nranks (\d+)\b")


class Builder(ColumnarBuilder):
    """Assigns lines to streams and keeps a bounded sample of each."""

    def __init__(self, retention: Retention) -> None:
        self.ret = retention
        self.streams: dict[StreamKey, StreamRetention] = {}
        self.pid_rank: dict[str, int] = {}
        self.pid_local: dict[str, tuple[str | None, int]] = {}
        self._detector: re2._Regexp | None = None
        self.launcher = LauncherParser()
        self.bundle = LogBundle()
        self._deferred: list[StreamRetention] = []  # streams with tail lines still in a block (columnar path)
        self._recent: deque[Block] = deque(maxlen=_KEPT_BLOCKS)  # blocks tail lines may still point into
        self._fuse = True  # try _fused_scan (until a block needs the general parser)

    def _stream(self, key: StreamKey) -> StreamRetention:
        st = self.streams.get(key)
        if st is None:
            if len(self.streams) >= self.ret.max_streams:
                key = "overflow"
                st = self.streams.get(key)
                if st is not None:
                    return st
            st = self.streams[key] = StreamRetention(tail=deque(maxlen=self.ret.tail))
        return st

    def add_block(self, block: str | bytes, masker: Masker, source: str, file_rank: int | None, lineno: int) -> int:
        """Parse, mask and retain one block of complete lines (text, or ASCII bytes as
        :func:`~denpex_ml.logs.normalize.iter_blocks` yields them); returns the last line number."""
        if isinstance(block, bytes):
            raw = block
            text: str | None = None
        else:
            raw = block.encode("utf-8", errors="replace")
            text = block
        if self.launcher.open:  # a launcher summary cut by the block boundary: its lines are fed on
            return self._general_bytes(raw, masker, source, file_rank, lineno)
        if (
            FUSED_SCAN
            and self._fuse
            and file_rank is None
            and COLUMNAR_MIN_BYTES is not None
            and len(raw) >= COLUMNAR_MIN_BYTES
            and raw.endswith(b"\n")
            and raw.isascii()
            and not contains(b"Failures:", raw)  # the one general-parser trigger that can span lines
        ):
            scanned = self._fused_scan(raw, masker)
            if scanned is not None:
                return self._add_block_columnar(raw, masker, source, file_rank, lineno, None, scanned)
            self._fuse = False  # a block of this job needs the general parser: the next ones likely too
        m = (_NOT_FAST_RANKED_B if file_rank is not None and BARE_NCCL_FAST else NOT_FAST_B).search(raw)
        if m is None:
            return self._add_block_fast(text, raw, masker, source, file_rank, lineno)
        split = raw.rfind(b"\n", 0, m.start()) + 1
        if split >= _MIN_FAST_PREFIX:
            # the lines before the first one that needs the general parser take the fast path
            # (typically all but a launcher summary at the end of the log). Splitting further,
            # around every NCCL debug line, was measured slower: each pass has a fixed cost.
            lineno = self._fast_bytes(raw[:split], masker, source, file_rank, lineno)
            raw = raw[split:]
        return self._general_bytes(raw, masker, source, file_rank, lineno)

    def _fast_bytes(self, raw: bytes, masker: Masker, source: str, file_rank: int | None, lineno: int) -> int:
        return self._add_block_fast(None, raw, masker, source, file_rank, lineno)

    # -- the columnar fast path ---------------------------------------------------------------
    def _add_block_fast(
        self, block: str | None, raw: bytes, masker: Masker, source: str, file_rank: int | None, lineno: int
    ) -> int:
        """Torchrun-prefixed or unprefixed lines, and in a per-rank file NCCL debug lines
        (``host:pid:tid [dev] NCCL ...``): the columnar engine for large blocks, else per line."""
        hosts: dict[int, str] | None = None
        if file_rank is not None and BARE_NCCL_FAST and b" NCCL" in raw:  # without it no line is NCCL's
            hosts = bare_nccl_hosts(raw, masker)
            if hosts is None:  # a line of that shape is some other prefix: the general parser reads it
                return self._general_bytes(raw, masker, source, file_rank, lineno)
            if hosts:
                self.bundle.formats["nccl"] += len(hosts)
        min_bytes = COLUMNAR_MIN_BYTES
        if min_bytes is not None and len(raw) >= min_bytes and raw.endswith(b"\n"):
            if raw.isascii():
                return self._add_block_columnar(raw, masker, source, file_rank, lineno, hosts)
            if block is None:
                block = raw.decode("utf-8", "replace")
            if _NON_ASCII_DIGIT.search(block) is None:  # Python's \d would read it, RE2's not
                return self._add_block_columnar(raw, masker, source, file_rank, lineno, hosts)
        if block is None:
            block = raw.decode("utf-8", "replace")
        self._flush_tails()
        return self._add_block_lines(block, raw, masker, source, file_rank, lineno, hosts)

    def _general_bytes(self, raw: bytes, masker: Masker, source: str, file_rank: int | None, lineno: int) -> int:
        return self._add_block_general(raw.decode("utf-8", "replace"), raw, masker, source, file_rank, lineno)

    def _add_block_general(
        self, block: str, raw: bytes, masker: Masker, source: str, file_rank: int | None, lineno: int
    ) -> int:
        """Any mix of launcher formats, line by line."""
        self._flush_tails()
        lines = block.split("\n")
        if lines and not lines[-1]:
            lines.pop()
        formats = self.bundle.formats
        # Phase 1: launcher prefixes on the raw lines (finds hosts before masking needs them).
        keys: list[StreamKey | None] = []
        rests: list[str] = []
        hosts: list[str | None] = []
        probe = _probe_formats(block)
        for line in lines:
            if not line or line.isspace():
                keys.append(None)
                rests.append("")
                hosts.append(None)
                continue
            p = parse_prefix(line) if probe else None
            if p is None:
                if "\r" in line:  # progress bar redrawn in place: keep what a terminal shows
                    line = collapse_cr(line)
                rests.append(line)
                hosts.append(None)
                keys.append(file_rank if file_rank is not None else _msg_rank_key(line))
                continue
            formats[p.format] += 1
            host = masker.pseudonym(p.host) if p.host else None
            rest = collapse_cr(p.rest) if "\r" in p.rest else p.rest
            rank = p.rank if p.rank is not None else file_rank
            key: StreamKey | None = rank
            if p.pid is not None and rank is None:
                pid_key = f"{host}:pid{p.pid}" if host else f"pid{p.pid}"
                if "nranks" in rest:
                    m = _NCCL_COMM_RANK.search(rest)
                    if m and pid_key not in self.pid_rank:
                        self.pid_rank[pid_key] = int(m.group(1))
                if p.local_rank is not None:
                    self.pid_local.setdefault(pid_key, (host, p.local_rank))
                key = self.pid_rank.get(pid_key)
                if key is None:
                    key = message_rank(rest)
                if key is None:
                    key = pid_key
            if key is None:
                key = message_rank(rest)
            if key is None:
                key = host if host is not None else GLOBAL_STREAM
            keys.append(key)
            rests.append(rest)
            hosts.append(host)
        self._detector = masker.detector()  # cached by the masker until it learns a new host
        # Phase 2: mask every line the detector flags (rules run on those lines only).
        hits = line_indices(self._detector, raw)
        if hits:
            idx = sorted(hits)
            masked = masker.mask_lines([rests[i] for i in idx])
            for i, text in zip(idx, masked, strict=True):
                rests[i] = text
        # Phase 3: retention; salient lines found by one RE2 pass over the block.
        salient = line_indices(SALIENT, raw)
        keep = self._keep
        for i, key in enumerate(keys):
            lineno += 1
            if key is None:
                continue
            self.bundle.n_lines += 1
            keep(GLOBAL_STREAM if key is None else key, source, lineno, rests[i], hosts[i], i in salient)
        return lineno

    def _add_block_lines(
        self,
        block: str,
        raw: bytes,
        masker: Masker,
        source: str,
        file_rank: int | None,
        lineno: int,
        line_hosts: dict[int, str] | None = None,
    ) -> int:
        """The common case in C-speed steps: every line is torchrun-prefixed or unprefixed.

        One regex pass splits all lines into (timestamp, rank, message); lines are grouped
        per stream, and per stream only the head, the tail and the salient lines become
        objects. Hosts in NCCL debug text are learned from one block-level scan.
        """
        pairs: list[tuple[str, str, str]] | None = None
        if file_rank is not None and "[rank" not in block and "[default" not in block:
            # a rank's own file without rank tags: every line is kept whole (a timestamp stays at
            # its start) in the file's stream, blank ones aside; no regex pass needed
            texts = block.split("\n")
            if block.endswith("\n"):
                texts.pop()  # the empty "line" after the block's final newline
            kept = [i for i, text in enumerate(texts) if text and not text.isspace()]
        else:
            pairs = _FAST_LINE.findall(block)
            if pairs and pairs[-1] == ("", "", ""):
                pairs.pop()  # the empty match after the block's final newline
            n_prefixed = sum(1 for _, r, _ in pairs if r)
            if n_prefixed:
                self.bundle.formats["torchrun"] += n_prefixed
            texts = [ts + rest if ts else rest for ts, _, rest in pairs]
        n_block = len(texts)
        if b" NCCL" in raw and not line_hosts:  # with bare NCCL lines their hosts were learned in line order
            self._learn_nccl_hosts(raw, masker)
        hits = line_indices(masker.detector(), raw)
        salient = line_indices(SALIENT, raw)
        if hits:
            idx = sorted(i for i in hits if i < len(texts))
            for i, text in zip(idx, masker.mask_lines([texts[i] for i in idx]), strict=True):
                texts[i] = text
        if "\r" in block:
            texts = [collapse_cr(t) if "\r" in t else t for t in texts]
        groups: dict[StreamKey, list[int]] = {}
        default_key: StreamKey = file_rank if file_rank is not None else GLOBAL_STREAM
        if pairs is None:
            if kept:
                groups[default_key] = kept
            pairs = []
        for i, (ts, r, rest) in enumerate(pairs):
            key: StreamKey
            if r:
                key = int(r)
            elif (not rest or rest.isspace()) and not ts:  # blank (a bare timestamp is kept, as by the general parser)
                continue
            elif file_rank is None and may_name_rank(rest):
                found = message_rank(rest)
                key = GLOBAL_STREAM if found is None else found
            else:
                key = default_key
            g = groups.get(key)
            if g is None:
                groups[key] = [i]
            else:
                g.append(i)
        self.bundle.n_truncated_lines += block.count(TRUNCATION_MARK)
        ret = self.ret
        host_of = (line_hosts or {}).get
        for key, idx in groups.items():
            st = self._stream(key)
            self.bundle.n_lines += len(idx)
            before = st.n_lines
            st.n_lines += len(idx)
            n_sal = 0
            if salient:
                sal_idx = [i for i in idx if i in salient]
                n_sal = len(sal_idx)
            else:
                sal_idx = []
            st.n_salient += n_sal
            take_head = max(0, ret.head - before)
            for i in idx[:take_head]:
                st.head.append((source, lineno + i + 1, texts[i], host_of(i), i in salient))
            cap = ret.salient * (4 if key == GLOBAL_STREAM else 1)
            n_head = min(take_head, len(idx))
            last_head = idx[n_head - 1] if n_head else -1  # idx is sorted: lines up to here went to the head
            for i in sal_idx:
                if i > last_head:
                    st.offer_salient((source, lineno + i + 1, texts[i], host_of(i), True), cap, ret.per_template)
            st.tail.extend(
                (source, lineno + i + 1, texts[i], host_of(i), i in salient) for i in idx[take_head:][-ret.tail :]
            )
        if line_hosts:
            self._stream(default_key).hosts.update(line_hosts.values())
        return lineno + n_block

    def _keep(self, key: StreamKey, source: str, lineno: int, text: str, host: str | None, salient: bool) -> None:
        st = self._stream(key)
        st.n_lines += 1
        if host is not None and host not in st.hosts:
            st.hosts.add(host)
        if self.launcher._section is not None or (salient and ("Root Cause" in text or "Failures:" in text)):
            self.launcher.feed(text)
        if TRUNCATION_MARK in text:
            self.bundle.n_truncated_lines += 1
        item = (source, lineno, text, host, salient)
        if st.n_lines <= self.ret.head:
            st.head.append(item)
            if salient:
                st.n_salient += 1
            return
        if salient:
            st.n_salient += 1
            st.offer_salient(item, self.ret.salient * (4 if key == GLOBAL_STREAM else 1), self.ret.per_template)
        st.tail.append(item)

    def _ranks_from_host_offsets(self, pid_streams: list[str]) -> None:
        """Processes whose NCCL lines never state their global rank, on a host where at least two
        other processes did: torchrun and its kin number a node's ranks contiguously (global rank =
        the node's first rank + local rank), so when every known process of the host shows the same
        offset between its global rank and the local device NCCL prints, an unknown one gets its
        local device + that offset, unless another process already holds that rank or two unknown
        ones would share it."""
        unknown = [k for k in pid_streams if k not in self.pid_rank]
        if not unknown:
            return
        offsets: dict[str | None, set[int]] = {}
        known: dict[str | None, int] = {}
        for k, rank in self.pid_rank.items():
            if k in self.pid_local:
                host, local = self.pid_local[k]
                offsets.setdefault(host, set()).add(rank - local)
                known[host] = known.get(host, 0) + 1
        claims: dict[int, list[str]] = {}
        for k in unknown:
            host, local = self.pid_local[k]
            offs = offsets.get(host, set())
            if len(offs) == 1 and known[host] >= 2:
                claims.setdefault(local + next(iter(offs)), []).append(k)
        taken = set(self.pid_rank.values())
        for rank, ks in claims.items():
            if len(ks) == 1 and rank not in taken:
                self.pid_rank[ks[0]] = rank

    def _launcher_lines_to_global(self) -> None:
        """The launcher's own lines (torchelastic's agent, DeepSpeed's launcher, srun) belong to no
        rank: a combined log whose file name names a rank (``job-rank5.log``) must not give them to
        that rank. Workers never print them, so kept lines of a rank stream that match move to
        the global stream."""
        for key in [k for k in self.streams if isinstance(k, int)]:
            st = self.streams[key]
            kept = "\n".join([it[2] for items in (st.head, st.salient, st.tail) for it in items])
            if not any(lit in kept for lit in _AGENT_LITERALS) or not _AGENT_LINE.search(kept):
                continue  # one search over the stream's kept lines (they hold no newline) finds none
            moved = 0
            parts = []
            for items in (st.head, st.salient, st.tail):
                go: list[tuple[str, int, str, str | None, bool]] = []
                stay: list[tuple[str, int, str, str | None, bool]] = []
                for it in items:
                    (go if _AGENT_LINE.search(it[2]) else stay).append(it)
                if go:
                    items.clear()
                    items.extend(stay)
                parts.append(go)
                moved += len(go)
            if not moved:
                continue
            dst = self._stream(GLOBAL_STREAM)
            dst.head.extend(parts[0])
            dst.salient.extend(parts[1])
            dst.tail.extend(parts[2])
            n_sal = sum(1 for part in parts for it in part if it[4])
            st.n_lines -= moved
            st.n_salient -= min(n_sal, st.n_salient)
            dst.n_lines += moved
            dst.n_salient += n_sal

    def finish(self, masker: Masker) -> LogBundle:
        self._flush_tails()
        # NCCL debug lines from a single host, with no rank stated anywhere: the local rank
        # printed by NCCL ("[3]") is the only basis, and on one node it is the global rank.
        pid_streams = [k for k in self.streams if isinstance(k, str) and k in self.pid_local and k not in self.pid_rank]
        if pid_streams and not any(isinstance(k, int) for k in self.streams):
            hosts = {self.pid_local[k][0] for k in pid_streams}
            local = [self.pid_local[k][1] for k in pid_streams]
            if len(hosts) == 1 and len(set(local)) == len(local):
                for k in pid_streams:
                    self.pid_rank[k] = self.pid_local[k][1]
        self._ranks_from_host_offsets(pid_streams)
        # Streams named by NCCL host:pid whose global rank became known later are merged in.
        for pid_key in [k for k in self.streams if isinstance(k, str) and k in self.pid_rank]:
            src = self.streams.pop(pid_key)
            dst = self._stream(self.pid_rank[pid_key])
            dst.head.extend(src.head)
            dst.salient.extend(src.salient)
            dst.tail.extend(src.tail)
            dst.n_lines += src.n_lines
            dst.n_salient += src.n_salient
            dst.hosts |= src.hosts
        self._launcher_lines_to_global()
        bundle = self.bundle
        names = {raw: masker.mask(raw) for raw in bundle.sources}  # member names can hold hosts/users
        bundle.sources = [names[raw] for raw in bundle.sources]
        # a host can be learned after lines naming it were kept (a later block, a launcher
        # summary, a prefix the fast path does not parse): every kept line is checked again,
        # all streams' lines in one pass
        kept: list[tuple[StreamKey, list[tuple[str, int, str, str | None, bool]]]] = []
        for key, st in self.streams.items():
            seen: set[tuple[str, int]] = set()
            items = []
            for item in (*st.head, *st.salient, *st.tail):
                ident = (item[0], item[1])
                if ident not in seen:
                    seen.add(ident)
                    items.append(item)
            kept.append((key, items))
        texts = iter(masker.mask_known_hosts_lines([item[2] for _, items in kept for item in items]))
        order = {s: i for i, s in enumerate(bundle.sources)}
        for key, items in kept:
            st = self.streams[key]
            lines = [
                LogLine(key, names.get(source, source), lineno, next(texts), host, salient)
                for source, lineno, _, host, salient in items
            ]
            lines.sort(key=lambda ln: (order.get(ln.source, 0), ln.lineno))
            bundle.streams[key] = RankLog(key, lines, st.n_lines, st.n_salient, st.hosts)
        bundle.system = [
            SystemLine(s.kind, s.host, names.get(s.source, s.source), s.lineno, masker.mask_known_hosts(s.text))
            for s in bundle.system
        ]
        bundle.launcher = self.launcher.summary
        bundle.masked = dict(masker.counts)
        bundle.n_hosts = masker.n_hosts
        return bundle


#: lines printed by a launcher about its workers, never by a worker (see ``_launcher_lines_to_global``)
_AGENT_LINE = re.compile(
    r"torch\.distributed\.elastic\.|Root Cause \(first observed failure\)|ChildFailedError|"
    r"\[launch\.py:\d+:\w+\]|deepspeed\.launcher\.launch|^srun: error:",
    re.MULTILINE,
)
#: one of these is in every line _AGENT_LINE matches (``in`` rules most streams out at C speed)
_AGENT_LITERALS = required_literals(_AGENT_LINE) or ("",)


_PROBE = re.compile(
    r"^(?:\[?\d{4}-\d\d-\d\d[T ]|[A-Z][a-z]{2} [ \d]\d \d\d:|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:|\[(?:rank|default)\d|\[(?:\d+,)?\d+\]<std|\{|\(\w+ pid=|\[[\w.-]+:\d+ *:\d|[ ]{0,5}\d{1,6}: |[\w.-]+:\d+:\d+ \[\d|[\w.-]+: )",
    re.MULTILINE,
)


_ISO_TS = ISO_TS_PREFIX
_FAST_LINE = re.compile(r"^(" + _ISO_TS + r")?(?:\[(?:rank|default)(\d{1,6})\]:[ ]?)?(.*)$", re.MULTILINE)
#: :data:`~denpex_ml.logs.patterns.NOT_FAST_PATTERN` for a per-rank file (its rank known from the file name), where an NCCL debug line at
#: line start (``host:pid:tid [dev] NCCL ...``) needs no stream key of its own: it takes the fast
#: path (:func:`~denpex_ml.logs.nccl_lines.bare_nccl_hosts`); behind a timestamp it still needs the general parser.
_NOT_FAST_RANKED_B = re2.compile(
    NOT_FAST_PATTERN.replace(NCCL_SHAPE + "|", "", 1).encode()
    + rb"|(?m)^(?:"
    + _ISO_TS.encode()
    + rb")"
    + NCCL_SHAPE.encode()
)

#: Columnar blocks of unranked files asked their three whole-block questions by one scan
#: (:meth:`~denpex_ml.logs.columnar_builder.ColumnarBuilder._fused_scan`); False: one scan each (the reference ``tests/logs/test_fused_scan.py`` compares against).
FUSED_SCAN = True

#: Per-rank files' NCCL debug lines on the fast path; False: the general parser reads every block
#: holding one (the reference ``tests/logs/test_bare_nccl_fast_path.py`` compares against).
BARE_NCCL_FAST = True


#: Columnar blocks kept while stream tails point into them: a tail line is made a string only once
#: it is this many blocks old and still in the tail (most are pushed out before). With 512 ranks a
#: stream gets ~14 lines of a 1 MiB block, so its 120-line tail spans ~9 blocks; 16 blocks hold
#: about 20 MB (bounded, whatever the log's size) and took a 200 MB / 512-rank classify from 14.1 s
#: to 10.2 s (3 blocks: every line became a string).
_KEPT_BLOCKS = 16

#: A block is split into a fast-path head and a general tail only when the head has this many bytes.
_MIN_FAST_PREFIX = 16 * 1024

#: Fast-path blocks of at least this many bytes go through the columnar engine (RE2 scans + numpy);
#: smaller ones line by line (no numpy import, no set-up for a few lines). None: never
#: (the reference path the equivalence test compares against).
COLUMNAR_MIN_BYTES: int | None = 256 * 1024
_NON_ASCII_DIGIT = re.compile(r"[^\D0-9]")


def _probe_formats(block: str) -> bool:
    """Cheap block-level test: could any line of the block carry a launcher prefix?"""
    return _PROBE.search(block) is not None


def _msg_rank_key(line: str) -> StreamKey:
    rank = message_rank(line)
    return GLOBAL_STREAM if rank is None else rank


def ingest_stream(
    builder: Builder,
    masker: Masker,
    stream: io.BufferedIOBase | io.RawIOBase,
    name: str,
    limits: IngestLimits,
    system: str | None = None,
) -> None:
    file_rank = rank_from_path(name)
    builder.bundle.sources.append(name)  # masked in finish(), once every host is known
    lineno = 0
    host: str | None = None
    if system is not None:  # a host's kernel / nvidia-smi / DCGM log: its host is learned before masking
        named = host_from_name(name)
        host = masker.host_pseudonym(named) if named else None
    try:
        for block in iter_blocks(stream, name=name, max_line_chars=limits.max_line_chars):  # type: ignore[arg-type]
            builder.bundle.n_bytes += len(block)
            if system is None:
                lineno = builder.add_block(block, masker, name, file_rank, lineno)
                continue
            if isinstance(block, bytes):
                block = block.decode("ascii")
            found = syslog_hosts(block.encode("utf-8", "replace"))
            if found:
                masker.learn_hosts(found)
            start = lineno
            lineno = builder.add_block(block, masker, name, file_rank, lineno)
            _keep_system_lines(builder.bundle, masker, block, system, host, name, start)
        builder.launcher.close()  # a summary ends with its file: the next file's lines are not its fields
    except (EOFError, zlib.error, gzip.BadGzipFile, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise ArchiveError(f"{name}: corrupt or truncated compressed data ({exc})") from None
    except OSError as exc:
        if isinstance(exc, DenpexError):
            raise
        raise ArchiveError(f"{name}: read failed ({exc})") from None


def _keep_system_lines(
    bundle: LogBundle, masker: Masker, block: str, kind: str, host: str | None, source: str, lineno: int
) -> None:
    """Keep the hardware lines of a system member's block, masked (bounded per job)."""
    room = MAX_SYSTEM_LINES - len(bundle.system)
    if room <= 0:
        return
    idx = sorted(line_indices(HARDWARE_LINE, block.encode("utf-8", "replace")))[:room]
    if not idx:
        return
    lines = block.split("\n")
    idx = [i for i in idx if i < len(lines)]
    texts = masker.mask_lines([collapse_cr(lines[i]) if "\r" in lines[i] else lines[i] for i in idx])
    bundle.system.extend(SystemLine(kind, host, source, lineno + i + 1, t) for i, t in zip(idx, texts, strict=True))
