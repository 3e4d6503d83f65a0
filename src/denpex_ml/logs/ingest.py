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
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import re2

from denpex_ml.errors import (
    ArchiveError,
    DenpexError,
)
from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, LogLine, RankLog, StreamKey
from denpex_ml.logs.columnar import (
    SPACE_OR_HIGH,
    TRUNCATION_MARK_B,
    Block,
    iso_timestamps,
    matching_line_ends,
    rank_prefixes,
)
from denpex_ml.logs.launcher import LauncherParser
from denpex_ml.logs.limits import IngestLimits, Retention
from denpex_ml.logs.masking import MAX_FIRST_PIECES_REGEX, Masker, first_pieces_alternation
from denpex_ml.logs.nccl_lines import NCCL_SHAPE, bare_nccl_hosts, nccl_hosts, nccl_hosts_of_lines
from denpex_ml.logs.normalize import TRUNCATION_MARK, collapse_cr, iter_blocks
from denpex_ml.logs.patterns import (
    HOST_PREFIX_SCREEN,
    ISO_TS_PREFIX,
    RANK_TAG,
    DigitShapeCache,
    contains,
    required_literals,
)
from denpex_ml.logs.prefixes import message_rank, parse_prefix, rank_from_path
from denpex_ml.logs.secret_rules import _OPTIONS, _key_block_lines
from denpex_ml.logs.system import (
    HARDWARE_LINE,
    MAX_SYSTEM_LINES,
    SystemLine,
    host_from_name,
    syslog_hosts,
)

__all__ = ["Builder", "ingest_stream"]

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
    r"Resource temporarily unavailable|[Cc]ertificate|[Cc]redential|segfault|nan loss|NaN loss|peer access"
)
SALIENT = re2.compile(SALIENT_PATTERN.encode())
_TEMPLATE = re.compile(r"0x[0-9a-fA-F]+|\d+")
#: retention templates (``_TEMPLATE.sub("#", line)``) by line shape, across jobs: no digit survives
#: the substitution, so it depends on where a line's digits and zeros are only
_RETENTION_TEMPLATES = DigitShapeCache()


def _retention_templates(texts: list[str]) -> list[str]:
    """``[_TEMPLATE.sub("#", t) for t in texts]`` (the texts hold no newline), through the cache."""
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:  # pragma: no cover - a line holds no newline
        return [_TEMPLATE.sub("#", t) for t in texts]
    data = joined.encode("utf-8", "surrogatepass")
    return _RETENTION_TEMPLATES.map(texts, data, lambda _i, text: _TEMPLATE.sub("#", text))


#: Largest Flight Recorder dump read (bytes); larger ones are skipped with a warning.
_NCCL_COMM_RANK = re.compile(r"\brank (\d+) nranks (\d+)\b")


class _Scanned(NamedTuple):
    """A block's line table and its lines' answers, asked by :meth:`Builder._fused_scan`."""

    table: Any
    hit: Any  # lines the masking gates or learned hosts' first pieces match in; None: not asked yet
    salient: Any


def _hit_pattern(masker: Masker) -> bytes:
    """The masking gates and the learned hosts' first pieces (while few): the lines to mask."""
    first_rx = masker._first_regex()
    gate: bytes = masker._gate().pattern
    return gate if first_rx is None else gate + b"|" + first_rx.pattern


@dataclass
class _Stream:
    head: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    tail: deque[tuple[str, int, str, str | None, bool]] = field(default_factory=deque)
    salient: list[tuple[str, int, str, str | None, bool]] = field(default_factory=list)
    templates: dict[str, int] = field(default_factory=dict)
    n_lines: int = 0
    n_salient: int = 0
    hosts: set[str] = field(default_factory=set)
    #: tail lines not yet made into strings: (block, line indices), oldest first, at most ``tail`` in all
    pending: list[tuple[Block, Any]] = field(default_factory=list)
    n_pending: int = 0

    def defer_tail(self, blk: Block, idx: Any, maxlen: int) -> None:
        """Append lines of ``blk`` to the tail, as ``deque(maxlen).extend`` would, without making them strings."""
        if maxlen == 0 or not len(idx):
            return
        self.pending.append((blk, idx))
        self.n_pending += len(idx)
        while self.n_pending - len(self.pending[0][1]) >= maxlen:
            self.n_pending -= len(self.pending.pop(0)[1])
        if self.n_pending > maxlen:
            b, first = self.pending[0]
            self.pending[0] = (b, first[self.n_pending - maxlen :])
            self.n_pending = maxlen

    def flush_tail(self, keep: Collection[int] = ()) -> None:
        """The deferred tail lines of every block not in ``keep`` (ids of blocks) become strings (in order)."""
        done = 0
        for b, idx in self.pending:
            if id(b) in keep:
                break
            self.tail.extend(b.items(idx.tolist()))
            self.n_pending -= len(idx)
            done += 1
        del self.pending[:done]

    def offer_salient(self, item: tuple[str, int, str, str | None, bool], cap: int, per_template: int) -> None:
        """Keep a salient line unless the budget is spent or its template was kept often enough."""
        if len(self.salient) >= cap:
            return
        self.offer_templated(item, _retention_templates([item[2]])[0], per_template)

    def offer_templated(self, item: tuple[str, int, str, str | None, bool], tpl: str, per_template: int) -> None:
        """:meth:`offer_salient` with the line's template already made (and the budget checked)."""
        seen = self.templates.get(tpl, 0)
        self.templates[tpl] = seen + 1
        if seen < per_template:
            self.salient.append(item)


class Builder:
    """Assigns lines to streams and keeps a bounded sample of each."""

    def __init__(self, retention: Retention) -> None:
        self.ret = retention
        self.streams: dict[StreamKey, _Stream] = {}
        self.pid_rank: dict[str, int] = {}
        self.pid_local: dict[str, tuple[str | None, int]] = {}
        self._detector: re2._Regexp | None = None
        self.launcher = LauncherParser()
        self.bundle = LogBundle()
        self._deferred: list[_Stream] = []  # streams with tail lines still in a block (columnar path)
        self._recent: deque[Block] = deque(maxlen=_KEPT_BLOCKS)  # blocks tail lines may still point into
        self._fuse = True  # try _fused_scan (until a block needs the general parser)

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
        m = (_NOT_FAST_RANKED_B if file_rank is not None and BARE_NCCL_FAST else _NOT_FAST_B).search(raw)
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

    def _add_block_columnar(
        self,
        raw: bytes,
        masker: Masker,
        source: str,
        file_rank: int | None,
        lineno: int,
        hosts: dict[int, str] | None = None,
        scanned: _Scanned | None = None,
    ) -> int:
        """What :meth:`_add_block_lines` does, with every per-line question asked of the whole
        block at once (RE2 scans of the block, numpy, Arrow for timestamps: see
        :mod:`~denpex_ml.logs.columnar`): only the lines that are masked or kept become Python
        strings. The tails of the streams point into the block and are made
        into strings only if the next block does not push them out (:meth:`_flush_tails`)."""
        import numpy as np

        from denpex_ml.logs.columnar import LineTable

        table = LineTable(raw) if scanned is None else scanned.table
        n = table.n
        head = table.window(raw, _WINDOW) if n else np.zeros((0, _WINDOW), dtype=np.uint8)
        ts_len, pre_len, ranks = rank_prefixes(head)
        # a line that may start with an ISO timestamp: the prefix pattern itself, on those lines
        digit = (head >= 48) & (head <= 57)
        maybe_ts = np.flatnonzero(digit[:, 0] | ((head[:, 0] == 91) & digit[:, 1]))
        if len(maybe_ts):
            # the timestamp by the RE2 kernel (leftmost-first: what Python's re takes, the rest of
            # the pattern always matching), then the rank prefix after it as for the other lines
            ts_found = iso_timestamps(table.window(raw, _TS_WINDOW, maybe_ts), raw, table.starts[maybe_ts])
            ts_len[maybe_ts] = ts_found
            after = table.window(raw, _WINDOW, maybe_ts, ts_found)
            _, pre_len[maybe_ts], ranks[maybe_ts] = rank_prefixes(after)
        if scanned is None and b" NCCL" in raw and not hosts:  # bare NCCL lines' hosts were learned in line order
            self._learn_nccl_hosts(raw, masker, table)
        prefixed = pre_len > 0
        n_prefixed = int(np.count_nonzero(prefixed))
        if n_prefixed:
            self.bundle.formats["torchrun"] += n_prefixed
        blk = Block(raw, table.starts, table.ends, ts_len, pre_len, source, lineno)
        blk.hosts = hosts or None
        if scanned is None:
            hits = self._hit_lines(table, raw, masker)
            salient = table.scan(_SALIENT_B)
        else:
            hits = self._hit_lines(table, raw, masker, scanned.hit)
            salient = scanned.salient
        blk.salient = salient
        if len(hits):
            idx = hits.tolist()
            blk.texts.update(zip(idx, masker.mask_joined_lines(blk.joined(idx), len(idx)), strict=True))
        # stream keys: the rank prefix, else the file's rank, a rank named in the message, or global
        default = file_rank if file_rank is not None else _GLOBAL
        keys = np.where(prefixed, ranks, default)
        bare = ~prefixed & (ts_len == 0)
        if n:
            maybe_blank = bare & (
                (table.ends == table.starts) | np.isin(head[:, 0], np.frombuffer(SPACE_OR_HIGH, dtype=np.uint8))
            )
            for i in np.flatnonzero(maybe_blank).tolist():
                rest = blk.raw_line(i)
                if not rest or rest.isspace():
                    keys[i] = _SKIP
        if file_rank is None:
            unprefixed = ~prefixed & (keys != _SKIP)
            if n_prefixed < n // 2:  # mostly unprefixed lines: one scan finds the few that may name a rank
                rows = np.flatnonzero(unprefixed & table.scan(_MSG_RANK_HINT_B))
            else:  # mostly "[rankN]:" lines, which all hold "[rank": the others one by one
                rows = np.flatnonzero(unprefixed)
            for i in rows.tolist():
                rest = blk.rest(i)
                if _may_name_rank(rest):
                    found = message_rank(rest)
                    keys[i] = _GLOBAL if found is None else found
        if not raw.isascii():  # the mark is not ASCII
            self.bundle.n_truncated_lines += raw.count(TRUNCATION_MARK_B)
        kept = np.flatnonzero(keys != _SKIP)
        kk = keys[kept]
        # the kept lines grouped by stream (a stable sort: in line order within a stream); stream
        # codes are ranks, -1: a 16-bit sort (radix) unless a rank is larger
        small = len(kk) and int(kk.min()) >= -32768 and int(kk.max()) <= 32767
        perm = np.argsort(kk.astype(np.int16) if small else kk, kind="stable")
        order = kept[perm]
        codes = kk[perm]
        if len(codes):
            bounds = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [len(codes)]))
        else:
            bounds = np.zeros(1, dtype=np.int64)
        group_starts = bounds[:-1]
        sal_order = salient[order]
        n_sal = np.add.reduceat(sal_order.astype(np.int64), group_starts).tolist() if len(order) else []
        bl = bounds.tolist()
        uniq = codes[group_starts].tolist()
        ret = self.ret
        head_max, tail_max, per_template = ret.head, ret.tail, ret.per_template
        self.bundle.n_lines += len(order)
        touched: list[_Stream] = []
        # streams in the order of their first line in the block
        for g in np.argsort(perm[group_starts], kind="stable").tolist():
            code = uniq[g]
            key: StreamKey = GLOBAL_STREAM if code == _GLOBAL else code
            b0 = bl[g]
            m = bl[g + 1] - b0
            st = self._stream(key)
            before = st.n_lines
            st.n_lines += m
            ns = n_sal[g]
            st.n_salient += ns
            take_head = head_max - before if before < head_max else 0
            idx = order[b0 : b0 + m]
            if take_head:
                st.head.extend(blk.items(idx[:take_head].tolist()))
            if ns:
                cap = ret.salient * (4 if key == GLOBAL_STREAM else 1)
                if len(st.salient) < cap:
                    sal_idx = idx[sal_order[b0 : b0 + m]]
                    n_head = min(take_head, m)
                    last_head = idx[n_head - 1] if n_head else -1
                    offered = sal_idx[sal_idx > last_head].tolist()
                    texts = blk.lines(offered)
                    # the templates of all of them by one substitution (no template holds a newline)
                    tpls = _retention_templates(texts) if texts else []
                    for i, text, tpl in zip(offered, texts, tpls, strict=True):
                        if len(st.salient) >= cap:
                            break  # offer_salient would refuse it and every later one, changing nothing
                        host = hosts.get(i) if hosts else None
                        st.offer_templated((source, lineno + i + 1, text, host, True), tpl, per_template)
            if m > take_head:
                if tail_max:
                    st.defer_tail(blk, idx[max(take_head, m - tail_max) :], tail_max)
                touched.append(st)
        if hosts:
            self._stream(file_rank if file_rank is not None else GLOBAL_STREAM).hosts.update(hosts.values())
        # tails still pointing into an earlier block become strings now: that block goes
        self._recent.append(blk)
        keep = {id(b) for b in self._recent}
        for st in self._deferred:
            st.flush_tail(keep)
        self._deferred = [st for st in {id(s): s for s in (*self._deferred, *touched)}.values() if st.pending]
        return lineno + n

    def _learn_nccl_hosts(self, raw: bytes, masker: Masker, table: Any = None) -> None:
        """Hosts of NCCL debug text (``host:pid:tid [dev] NCCL``), as the block-level findall finds them."""
        found = nccl_hosts(raw) if table is None else nccl_hosts_of_lines(raw, table.starts, table.ends)
        hosts = {h.decode("utf-8", "replace") for h in found}
        if hosts:
            masker.learn_hosts(sorted(hosts))  # sorted: the same pseudonyms on every run

    def _hit_lines(self, table: Any, raw: bytes, masker: Masker, hit: Any = None) -> Any:
        """Sorted indices of the lines that masking may change: what :class:`_Detector` flags
        (``hit``: the lines of the scan below, found by :meth:`_fused_scan`)."""
        import numpy as np

        first_rx = masker._first_regex()
        if hit is None:
            # the rule gates and the learned hosts' first pieces by one scan: a line is flagged when
            # either starts a match in it, which is when their alternation does
            hit = table.scan(_hit_pattern(masker), _OPTIONS)
        if contains(b"PRIVATE KEY", raw):
            starts = sorted({s for s in _key_block_lines(raw) if s < len(raw)})
            if starts:
                hit[np.searchsorted(table.starts, np.array(starts, dtype=np.int64))] = True
        if first_rx is None and masker._first:
            for i in _line_indices(masker.detector(), raw):  # the dict lookup per piece: too many hosts for one regex
                if i < table.n:
                    hit[i] = True
        return np.flatnonzero(hit)

    def _fused_scan(self, raw: bytes, masker: Masker) -> _Scanned | None:
        """The three whole-block questions of a columnar block of an unranked file, by one RE2
        scan: does a line need the general parser, which lines may masking change, which are
        salient. ``None`` (nothing learned) when a line needs the general parser.

        One scan finds every line in which any of the patterns starts a match (none of them can
        match a newline: the one general-parser trigger that can, ``^\\s*Failures:``, keeps a block
        off this path). The few lines it finds, joined by newlines, are then asked each question
        on their own (a line starts a match in the joined text exactly where it does in the
        block). The hosts of the block's NCCL lines are learned first only on paper: the learned
        hosts' first pieces are asked with those pieces added, and are asked again of the whole
        block if learning them gave other pieces."""
        import numpy as np

        from denpex_ml.logs.columnar import LineTable

        table = LineTable(raw)
        found = nccl_hosts_of_lines(raw, table.starts, table.ends) if b" NCCL" in raw else set()
        names = sorted({h.decode("utf-8", "replace") for h in found})
        pieces = masker.first_pieces_after(names)
        if len(pieces) > MAX_FIRST_PIECES_REGEX:
            return None if _NOT_FAST_B.search(raw) is not None else self._scanned_plain(raw, masker, names, table)
        first = first_pieces_alternation(pieces)
        hit_pattern = masker._gate().pattern + (b"|" + first if first else b"")
        every = matching_line_ends(_NOT_FAST_PATTERN_B + b"|" + _SALIENT_B + b"|" + hit_pattern, raw, _OPTIONS)
        rows = np.searchsorted(table.ends, np.array(every, dtype=np.int64))
        starts = table.starts[rows].tolist()
        ends = table.ends[rows].tolist()
        joined = b"\n".join([raw[a:b] for a, b in zip(starts, ends, strict=True)])
        lengths = np.array(ends, dtype=np.int64) - np.array(starts, dtype=np.int64)
        line_ends = np.cumsum(lengths + 1) - 1  # of the joined lines
        # the salient lines and those for the general parser by one scan of the joined lines, then
        # the general parser's pattern on the few found: when it is in none, they are the salient ones
        found_ends = matching_line_ends(_SALIENT_OR_NOT_FAST_B, joined)
        sal = np.searchsorted(line_ends, np.array(found_ends, dtype=np.int64))
        if found_ends:
            found_starts = (line_ends[sal] - lengths[sal]).tolist()
            if _NOT_FAST_B.search(b"\n".join([joined[a:b] for a, b in zip(found_starts, found_ends, strict=True)])):
                return None
        if names:
            masker.learn_hosts(names)  # what _learn_nccl_hosts learns
        salient = np.zeros(table.n, dtype=np.bool_)
        salient[rows[sal]] = True
        if set(masker._first) != pieces or (masker._first and masker._first_regex() is None):
            return _Scanned(table, None, salient)  # learning gave other pieces: the whole block is asked
        hit = np.zeros(table.n, dtype=np.bool_)
        hit[rows] = True
        if len(sal):  # a salient line was found for salience, not necessarily for masking
            hit[rows[sal]] = False
            sal_rows = rows[sal]
            sal_joined = b"\n".join(
                [raw[a:b] for a, b in zip(table.starts[sal_rows].tolist(), table.ends[sal_rows].tolist(), strict=True)]
            )
            sal_ends = np.cumsum(table.ends[sal_rows] - table.starts[sal_rows] + 1) - 1
            masked = np.searchsorted(
                sal_ends, np.array(matching_line_ends(hit_pattern, sal_joined, _OPTIONS), dtype=np.int64)
            )
            hit[sal_rows[masked]] = True
        return _Scanned(table, hit, salient)

    def _scanned_plain(self, raw: bytes, masker: Masker, names: list[str], table: Any) -> _Scanned:
        """What :meth:`_fused_scan` gives, asked of the whole block one question at a time."""
        if names:
            masker.learn_hosts(names)
        return _Scanned(table, None, table.scan(_SALIENT_B))

    def _flush_tails(self) -> None:
        """Every deferred tail line becomes a string (before anything else touches the tails)."""
        for st in self._deferred:
            st.flush_tail()
        self._deferred = []
        self._recent.clear()

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
        hits = _line_indices(self._detector, raw)
        if hits:
            idx = sorted(hits)
            masked = masker.mask_lines([rests[i] for i in idx])
            for i, text in zip(idx, masked, strict=True):
                rests[i] = text
        # Phase 3: retention; salient lines found by one RE2 pass over the block.
        salient = _line_indices(SALIENT, raw)
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
        hits = _line_indices(masker.detector(), raw)
        salient = _line_indices(SALIENT, raw)
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
            elif file_rank is None and _may_name_rank(rest):
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
_HOST_SCREEN = HOST_PREFIX_SCREEN
_FAST_LINE = re.compile(r"^(" + _ISO_TS + r")?(?:\[(?:rank|default)(\d{1,6})\]:[ ]?)?(.*)$", re.MULTILINE)
# Anything that needs the general parser: other launcher prefixes, NCCL debug or host
# prefixes at line start, launcher summaries (parsed in order), syslog timestamps.
_NOT_FAST_PATTERN = (
    r"(?m)^(?:" + _ISO_TS + r")?(?:\[(?:\d+,)?\d+\]<std|\{|\(\w+ pid=|\[[\w.-]+:\d+ *:\d|[ ]{0,5}\d{1,6}: |"
    r"[\w.-]+:\d+:\d+ \[\d|(?:"
    + _HOST_SCREEN
    + r"): |"
    + RANK_TAG
    + r"(?:\[(?:rank|default)\d|\[(?:\d+,)?\d+\]<|\[[\w.-]+:\d+ *:\d|\(\w+ pid=|\{|"
    r"(?:" + _HOST_SCREEN + r"): )|[A-Z][a-z]{2} [ \d]\d \d\d:"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:)"
    r"|Root Cause \(first observed failure\)|^\s*Failures:"
)
# RE2 on bytes: linear time, no per-match offset conversion
_NOT_FAST_PATTERN_B = _NOT_FAST_PATTERN.encode()
_NOT_FAST_B = re2.compile(_NOT_FAST_PATTERN_B)
#: The same for a per-rank file (its rank known from the file name), where an NCCL debug line at
#: line start (``host:pid:tid [dev] NCCL ...``) needs no stream key of its own: it takes the fast
#: path (:func:`~denpex_ml.logs.nccl_lines.bare_nccl_hosts`); behind a timestamp it still needs the general parser.
_NOT_FAST_RANKED_B = re2.compile(
    _NOT_FAST_PATTERN.replace(NCCL_SHAPE + "|", "", 1).encode()
    + rb"|(?m)^(?:"
    + _ISO_TS.encode()
    + rb")"
    + NCCL_SHAPE.encode()
)

#: Columnar blocks of unranked files asked their three whole-block questions by one scan
#: (:meth:`Builder._fused_scan`); False: one scan each (the reference ``tests/logs/test_fused_scan.py`` compares against).
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
_GLOBAL = -1  # stream codes in the columnar path: ranks are >= 0
_SKIP = -2
_TS_WINDOW = 64
_MSG_RANK_HINT_B = rb"\[Rank|\[RANK|\[rank| nranks |\[PG ID|\d TP\d"
_SALIENT_B = SALIENT_PATTERN.encode()
_SALIENT_OR_NOT_FAST_B = _SALIENT_B + b"|" + _NOT_FAST_PATTERN_B
_NON_ASCII_DIGIT = re.compile(r"[^\D0-9]")
_WINDOW = 18  # "[default" + 6 digits + "]: " + 1


def _probe_formats(block: str) -> bool:
    """Cheap block-level test: could any line of the block carry a launcher prefix?"""
    return _PROBE.search(block) is not None


def _may_name_rank(rest: str) -> bool:
    """Whether a line after its timestamp holds one of the marks :func:`message_rank` reads (the
    text form of :data:`_MSG_RANK_HINT_B`): a cheap screen before the regex."""
    return (
        "[Rank" in rest
        or "[RANK" in rest
        or "[rank" in rest
        or " nranks " in rest
        or "[PG ID" in rest
        or rest.startswith("TP")
    )


def _msg_rank_key(line: str) -> StreamKey:
    rank = message_rank(line)
    return GLOBAL_STREAM if rank is None else rank


def _line_indices(pattern: Any, block: bytes) -> set[int]:
    """Indices of the lines of ``block`` (UTF-8 bytes) in which ``pattern`` (an RE2 pattern compiled
    with the default options, or a masking detector) starts a match: one scan of the block, no
    match objects."""
    if hasattr(pattern, "line_starts"):
        marks = pattern.line_starts(block)
    else:
        marks = matching_line_ends(pattern.pattern, block)  # a line's end is in it as its start is
    found: set[int] = set()
    line = 0
    pos = 0
    for at in marks:
        line += block.count(b"\n", pos, at)
        pos = at
        found.add(line)
    return found


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
    idx = sorted(_line_indices(HARDWARE_LINE, block.encode("utf-8", "replace")))[:room]
    if not idx:
        return
    lines = block.split("\n")
    idx = [i for i in idx if i < len(lines)]
    texts = masker.mask_lines([collapse_cr(lines[i]) if "\r" in lines[i] else lines[i] for i in idx])
    bundle.system.extend(SystemLine(kind, host, source, lineno + i + 1, t) for i, t in zip(idx, texts, strict=True))
