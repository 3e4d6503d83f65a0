"""The columnar fast path of :class:`~denpex_ml.logs.ingest.Builder`: a block of lines asked
every per-line question at once.

:class:`ColumnarBuilder` is the part of the builder that reads large ASCII blocks of
torchrun-prefixed or unprefixed lines column by column (the line tables, RE2 scans and numpy of
:mod:`~denpex_ml.logs.columnar`): one fused RE2 scan per block of an unranked file for its three
questions (general parser, masking, salience), NCCL host learning, the lines masking may change,
and retention by stream with the tails left in the block until the next blocks push them out.
:mod:`~denpex_ml.logs.ingest` holds the streaming, the routing of blocks between this path and
the per-line ones, and the streams' state.
"""

from __future__ import annotations

from collections import deque
from itertools import accumulate
from typing import TYPE_CHECKING, Any, NamedTuple

import re2

from denpex_ml.logs.bundle import GLOBAL_STREAM, LogBundle, StreamKey
from denpex_ml.logs.columnar import (
    SPACE_OR_HIGH,
    TRUNCATION_MARK_B,
    Block,
    StreamRetention,
    iso_timestamps,
    line_indices,
    matching_line_ends,
    rank_prefixes,
)
from denpex_ml.logs.limits import Retention
from denpex_ml.logs.masking import MAX_FIRST_PIECES_REGEX, Masker, first_pieces_alternation
from denpex_ml.logs.nccl_lines import nccl_hosts, nccl_hosts_of_lines
from denpex_ml.logs.patterns import NOT_FAST_PATTERN, SALIENT_PATTERN, contains, retention_templates
from denpex_ml.logs.prefixes import may_name_rank, message_rank
from denpex_ml.logs.secret_rules import _OPTIONS, _key_block_lines

__all__ = ["NOT_FAST_B", "ColumnarBuilder"]

# RE2 on bytes: linear time, no per-match offset conversion
_NOT_FAST_PATTERN_B = NOT_FAST_PATTERN.encode()
#: a line that needs the general parser (:data:`~denpex_ml.logs.patterns.NOT_FAST_PATTERN`)
NOT_FAST_B = re2.compile(_NOT_FAST_PATTERN_B)
_GLOBAL = -1  # stream codes in the columnar path: ranks are >= 0
_SKIP = -2
_TS_WINDOW = 64
_MSG_RANK_HINT_B = rb"\[Rank|\[RANK|\[rank| nranks |\[PG ID|\d TP\d"
_SALIENT_B = SALIENT_PATTERN.encode()
_SALIENT_OR_NOT_FAST_B = _SALIENT_B + b"|" + _NOT_FAST_PATTERN_B
_WINDOW = 18  # "[default" + 6 digits + "]: " + 1


class _Scanned(NamedTuple):
    """A block's line table and its lines' answers, asked by :meth:`ColumnarBuilder._fused_scan`."""

    table: Any
    hit: Any  # lines the masking gates or learned hosts' first pieces match in; None: not asked yet
    salient: Any


def _hit_pattern(masker: Masker) -> bytes:
    """The masking gates and the learned hosts' first pieces (while few): the lines to mask."""
    first_rx = masker._first_regex()
    gate: bytes = masker._gate().pattern
    return gate if first_rx is None else gate + b"|" + first_rx.pattern


class ColumnarBuilder:
    """The columnar methods of :class:`~denpex_ml.logs.ingest.Builder` (a mixin: the state it
    reads and writes is the builder's, set up by its ``__init__``)."""

    ret: Retention
    bundle: LogBundle
    _deferred: list[StreamRetention]  # streams with tail lines still in a block
    _recent: deque[Block]  # blocks tail lines may still point into

    if TYPE_CHECKING:

        def _stream(self, key: StreamKey) -> StreamRetention: ...

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
                if may_name_rank(rest):
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
        touched: list[StreamRetention] = []
        sal_rows: list[int] | None = None
        sal_texts: list[str] = []
        sal_tpls: list[str] = []
        sal_from: list[int] = []
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
                    if sal_rows is None:
                        # every kept salient line of the block, grouped as ``order``, made a string and
                        # templated at once (one join, one substitution per line shape), the first time
                        # a stream offers one: a line that is not offered costs less than a call per stream
                        sal_rows = order[sal_order].tolist()
                        sal_texts = blk.lines(sal_rows)
                        sal_tpls = retention_templates(sal_texts)
                        sal_from = [0, *accumulate(n_sal[:-1])]
                    n_head = min(take_head, m)
                    last_head = int(idx[n_head - 1]) if n_head else -1
                    s0 = sal_from[g]
                    for k in range(s0, s0 + ns):
                        i = sal_rows[k]
                        if i <= last_head:
                            continue  # in the head already
                        if len(st.salient) >= cap:
                            break  # offer_salient would refuse it and every later one, changing nothing
                        host = hosts.get(i) if hosts else None
                        st.offer_templated(
                            (source, lineno + i + 1, sal_texts[k], host, True), sal_tpls[k], per_template
                        )
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
            for i in line_indices(masker.detector(), raw):  # the dict lookup per piece: too many hosts for one regex
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
            return None if NOT_FAST_B.search(raw) is not None else self._scanned_plain(raw, masker, names, table)
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
            if NOT_FAST_B.search(b"\n".join([joined[a:b] for a, b in zip(found_starts, found_ends, strict=True)])):
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
