"""Cross-rank analysis of PyTorch Flight Recorder dumps: which rank broke the lockstep.

Every rank of a process group must issue the same collectives in the same order; the
Flight Recorder numbers them per group (``collective_seq_id``). Lined up by that number
across the ranks' dumps, a failed job shows one of three pictures:

``mismatch``
    at some sequence number ranks called different collectives, or the same one with
    different shapes or dtypes. The rank(s) outside the largest agreeing group are blamed
    (no one when there is no strict majority, e.g. one rank against one).
``missing-rank``
    some ranks of the group reached sequence number *n* while others stopped before it:
    they never entered the collective the rest waits in. The ranks behind are blamed.
``missing-dump``
    a rank that should have written a dump did not (it may have crashed or been killed).
    Blamed only when nothing else is found.

Point-to-point operations are not lined up (their numbering is per peer pair); they still
appear among the entries that never completed. Dumps should be taken when the job failed:
dumps of a healthy job taken at different moments can show ranks one collective apart.

Work is linear in the number of entries (one pass to group them, one sort of sequence
numbers per group); evidence lines are short and rank lists are compressed to ranges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from denpex_ml.errors import InvalidInputError
from denpex_ml.hang.suspects import ranks_text
from denpex_ml.logs.flight_recorder import FlightRecorderDump, FREntry, FRFrame

__all__ = ["FRFinding", "FRStuckEntry", "FlightRecorderFindings", "analyse_flight_recorder"]

#: Collectives whose tensors must have the same shapes and dtypes on every rank. Others
#: (gather/scatter with a root, all_to_all with uneven splits, the ``_v`` variants,
#: coalesced wrappers) legitimately differ, so only their names are compared.
_SAME_SHAPES = frozenset(
    {
        "all_reduce",
        "allreduce",
        "allreduce_coalesced",
        "all_reduce_barrier",
        "broadcast",
        "_broadcast_oop",
        "reduce",
        "_reduce_oop",
        "all_gather",
        "allgather",
        "all_gather_single",
        "_all_gather_base",
        "_allgather_base",
        "all_gather_into_tensor_coalesced",
        "allgather_into_tensor_coalesced",
        "reduce_scatter",
        "reduce_scatter_single",
        "_reduce_scatter_base",
        "reduce_scatter_tensor_coalesced",
    }
)
_ASPECTS = ("op", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes")
_KIND_ORDER = {"mismatch": 0, "missing-rank": 1, "missing-dump": 2}
_MAX_TEXT = 160
_MAX_MISSING_SCAN = 100_000

# One entry as compared across ranks: op, then shapes and dtypes (None when not compared).
_Signature = tuple[str, Any, Any, Any, Any]


@dataclass(frozen=True)
class FRStuckEntry:
    """The oldest operation of one rank and process group that had not completed at the dump."""

    rank: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    op: str
    state: str
    is_p2p: bool
    frames: tuple[FRFrame, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "rank": self.rank,
            "pg_name": self.pg_name,
            "pg_desc": self.pg_desc,
            "collective_seq_id": self.collective_seq_id,
            "op": self.op,
            "state": self.state,
            "is_p2p": self.is_p2p,
            "frames": [_frame_dict(f) for f in self.frames],
        }


@dataclass(frozen=True)
class FRFinding:
    """One thing that went wrong in one process group.

    Attributes
    ----------
    kind:
        ``mismatch``, ``missing-rank`` or ``missing-dump``.
    pg_name, pg_desc:
        The process group (empty for ``missing-dump``).
    collective_seq_id:
        The first sequence number where ranks disagree (``mismatch``) or that the lagging
        ranks never entered (``missing-rank``); ``None`` for ``missing-dump``.
    ranks:
        The odd ranks: outside the majority, behind the others, or without a dump. Empty
        when a mismatch has no strict majority.
    others:
        The ranks they are compared with.
    differs:
        For a mismatch, what differs: ``op``, ``input_sizes``, ``output_sizes``,
        ``input_dtypes``, ``output_dtypes`` or ``count`` (a different number of entries).
    evidence:
        One human-readable line.
    frames:
        The stack of the first odd rank's entry at that point (innermost first; empty for
        JSON dumps, which carry no stacks).
    time_ns:
        When the majority created the collective in question (orders findings across groups).
    """

    kind: str
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    ranks: tuple[int, ...]
    others: tuple[int, ...]
    differs: tuple[str, ...]
    evidence: str
    frames: tuple[FRFrame, ...] = ()
    time_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "pg_name": self.pg_name,
            "pg_desc": self.pg_desc,
            "collective_seq_id": self.collective_seq_id,
            "ranks": list(self.ranks),
            "others": list(self.others),
            "differs": list(self.differs),
            "evidence": self.evidence,
            "frames": [_frame_dict(f) for f in self.frames],
            "time_ns": self.time_ns,
        }


@dataclass(frozen=True)
class FlightRecorderFindings:
    """What the Flight Recorder dumps of a job say about its failure.

    Attributes
    ----------
    kind:
        The kind of the main finding (``mismatch``, ``missing-rank``, ``missing-dump``), or
        ``None`` when the ranks agree. The main finding is the first that blames a rank, in
        the order of :attr:`findings`.
    blamed_ranks:
        The ranks the main finding points at (the odd one out, the lagging ones).
    findings:
        Every finding, main first, then mismatches, missing ranks and missing dumps, each
        in the order the collectives were created.
    not_completed:
        Per rank and process group, the oldest operation that had not completed.
    missing_dumps:
        Ranks expected (below the highest rank seen, or listed in ``pg_config``) without a dump.
    ranks:
        The ranks whose dumps were analysed.
    evidence:
        Short lines for a report, main finding first.
    frames:
        The stack of the blamed rank's stuck entry (innermost first), when the dump has one.
    """

    kind: str | None
    blamed_ranks: tuple[int, ...]
    findings: tuple[FRFinding, ...]
    not_completed: tuple[FRStuckEntry, ...]
    missing_dumps: tuple[int, ...]
    ranks: tuple[int, ...]
    evidence: tuple[str, ...]
    frames: tuple[FRFrame, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when no rank disagrees, lags or lacks a dump."""
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "blamed_ranks": list(self.blamed_ranks),
            "findings": [f.to_dict() for f in self.findings],
            "not_completed": [s.to_dict() for s in self.not_completed],
            "missing_dumps": list(self.missing_dumps),
            "ranks": list(self.ranks),
            "evidence": list(self.evidence),
            "frames": [_frame_dict(f) for f in self.frames],
        }


def analyse_flight_recorder(dumps: Mapping[int, FlightRecorderDump]) -> FlightRecorderFindings:
    """Line up the ranks' Flight Recorder dumps and find who broke the lockstep.

    Parameters
    ----------
    dumps:
        One dump per global rank, keyed by rank.

    Returns
    -------
    FlightRecorderFindings

    Raises
    ------
    InvalidInputError
        A key is not a non-negative integer or a value is not a :class:`FlightRecorderDump`.

    Examples
    --------
    >>> from denpex_ml.logs.flight_recorder import read_flight_recorder
    >>> def dump(rank, op):
    ...     entry = ('{"profiling_name": "nccl:%s", "collective_seq_id": 7, "process_group": ["0", "default_pg"],'
    ...              ' "input_sizes": [[4]], "state": "started"}' % op)
    ...     return read_flight_recorder(b'{"version": "2.10", "entries": [%s]}' % entry.encode(), source=f"r{rank}")
    >>> found = analyse_flight_recorder({0: dump(0, "all_reduce"), 1: dump(1, "all_gather"), 2: dump(2, "all_reduce")})
    >>> found.kind, found.blamed_ranks
    ('mismatch', (1,))
    >>> found.evidence[0]
    'pg 0 (default_pg) seq 7: rank 1 all_gather [[4]] vs ranks 0, 2 all_reduce [[4]]'
    """
    for rank, dump in dumps.items():
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise InvalidInputError(f"analyse_flight_recorder: ranks must be non-negative integers, got {rank!r}")
        if not isinstance(dump, FlightRecorderDump):
            raise InvalidInputError(
                f"analyse_flight_recorder: rank {rank}: expected a FlightRecorderDump, got {type(dump).__name__}"
            )
    ranks = tuple(sorted(dumps))
    groups = _group_entries(dumps)
    configured = _configured_members(dumps)
    findings: list[FRFinding] = []
    for pg_name in sorted(groups):
        group = groups[pg_name]
        members = _members(group, configured.get(pg_name, ()), dumps)
        mismatch = _first_mismatch(group, members)
        if mismatch is not None:
            findings.append(mismatch)
        lagging = _lagging(group, members, dumps)
        if lagging is not None:
            findings.append(lagging)
    missing = _missing_dumps(dumps)
    if missing:
        findings.append(
            FRFinding(
                kind="missing-dump",
                pg_name="",
                pg_desc="",
                collective_seq_id=None,
                ranks=missing,
                others=ranks,
                differs=(),
                evidence=f"no Flight Recorder dump from {ranks_text(missing)} (dumps from {ranks_text(ranks)})",
            )
        )
    findings.sort(key=lambda f: (_KIND_ORDER[f.kind], f.time_ns is None, f.time_ns or 0, f.pg_name))
    not_completed = _not_completed(dumps)
    main = next((f for f in findings if f.ranks), findings[0] if findings else None)
    if main is not None and main is not findings[0]:
        findings.remove(main)
        findings.insert(0, main)
    blamed = main.ranks if main else ()
    frames = _stuck_frames(main, not_completed) if main else ()
    evidence = [f.evidence for f in findings]
    stuck_lines = [_stuck_text(s) for s in not_completed if s.rank in blamed]
    evidence.extend(stuck_lines[:4])
    return FlightRecorderFindings(
        kind=main.kind if main else None,
        blamed_ranks=blamed,
        findings=tuple(findings),
        not_completed=not_completed,
        missing_dumps=missing,
        ranks=ranks,
        evidence=tuple(evidence),
        frames=frames,
    )


@dataclass
class _Group:
    """The collectives of one process group, per rank and sequence number."""

    name: str
    desc: str = ""
    by_rank: dict[int, dict[int, list[FREntry]]] = field(default_factory=dict)
    pg_ids: dict[int, int] = field(default_factory=dict)  # rank -> its local pg_id


def _group_entries(dumps: Mapping[int, FlightRecorderDump]) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for rank, dump in dumps.items():
        for entry in dump.entries:
            if entry.is_p2p:
                continue
            group = groups.get(entry.pg_name)
            if group is None:
                group = groups[entry.pg_name] = _Group(entry.pg_name)
            if not group.desc and entry.pg_desc:
                group.desc = entry.pg_desc
            group.by_rank.setdefault(rank, {}).setdefault(entry.collective_seq_id, []).append(entry)
            group.pg_ids.setdefault(rank, entry.pg_id)
    return groups


def _configured_members(dumps: Mapping[int, FlightRecorderDump]) -> dict[str, set[int]]:
    """Per process group name, the ranks ``pg_config`` lists (in any dump) that have a dump."""
    out: dict[str, set[int]] = defaultdict(set)
    for dump in dumps.values():
        for config in dump.pg_config:
            if config.ranks:
                out[config.name].update(r for r in config.ranks if r in dumps)
    return out


def _members(group: _Group, configured: Iterable[int], dumps: Mapping[int, FlightRecorderDump]) -> tuple[int, ...]:
    """Ranks of the group that have a dump: those with entries, listed in pg_config, or all for the world group."""
    members = set(group.by_rank)
    members.update(configured)
    if group.desc == "default_pg" or (not group.desc and group.name == "0"):
        members.update(dumps)
    return tuple(sorted(members))


def _signature(entries: Sequence[FREntry]) -> tuple[_Signature, ...]:
    out: list[_Signature] = []
    for e in entries:
        if e.op in _SAME_SHAPES:
            out.append((e.op, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes))
        else:
            out.append((e.op, None, None, None, None))
    return tuple(out)


def _first_mismatch(group: _Group, members: Sequence[int]) -> FRFinding | None:
    by_seq: dict[int, list[int]] = defaultdict(list)
    for rank in members:
        for seq in group.by_rank.get(rank, {}):
            by_seq[seq].append(rank)
    for seq in sorted(by_seq):
        present = by_seq[seq]
        if len(present) < 2:
            continue
        classes: dict[tuple[_Signature, ...], list[int]] = {}
        for rank in present:
            classes.setdefault(_signature(group.by_rank[rank][seq]), []).append(rank)
        if len(classes) > 1:
            return _mismatch_finding(group, seq, classes)
    return None


def _mismatch_finding(group: _Group, seq: int, classes: Mapping[tuple[_Signature, ...], list[int]]) -> FRFinding:
    ordered = sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    majority_sig, majority = ordered[0]
    strict = len(ordered[1][1]) < len(majority)
    odd = sorted(r for _, rs in ordered[1:] for r in rs) if strict else []
    first_rank = odd[0] if odd else ordered[1][1][0]
    differs: set[str] = set()
    for sig, _ in ordered[1:]:
        differs.update(_differences(sig, majority_sig))
    sides = [f"{ranks_text(rs)} {_entries_text(group.by_rank[rs[0]][seq])}" for _, rs in ordered[1:]]
    base = f"{ranks_text(majority)} {_entries_text(group.by_rank[majority[0]][seq])}"
    text = f"{_pg_text(group)} seq {seq}: {'; '.join(sides)} vs {base}"
    aspects = tuple(a for a in (*_ASPECTS, "count") if a in differs)
    if "op" not in differs:  # a different op shows in the text; other differences are named
        text += f" ({', '.join(aspects)} differ)"
    if not strict:
        text += "; no majority, no rank blamed"
    stuck = group.by_rank[first_rank][seq]
    return FRFinding(
        kind="mismatch",
        pg_name=group.name,
        pg_desc=group.desc,
        collective_seq_id=seq,
        ranks=tuple(odd),
        others=tuple(sorted(majority)),
        differs=aspects,
        evidence=_cut(text),
        frames=stuck[-1].frames,
        time_ns=min(e.time_created_ns for e in group.by_rank[majority[0]][seq]) or None,
    )


def _differences(sig: tuple[_Signature, ...], base: tuple[_Signature, ...]) -> set[str]:
    out = {"count"} if len(sig) != len(base) else set()
    for a, b in zip(sig, base, strict=False):
        out.update(name for name, x, y in zip(_ASPECTS, a, b, strict=True) if x != y)
    return out


def _lagging(group: _Group, members: Sequence[int], dumps: Mapping[int, FlightRecorderDump]) -> FRFinding | None:
    if len(members) < 2:
        return None
    last = {rank: _last_seq(group, rank, dumps[rank]) for rank in members}
    front = max(last.values())
    behind = sorted(r for r in members if last[r] < front)
    if not behind:
        return None
    ahead = tuple(r for r in members if last[r] == front)
    lowest = min(last[r] for r in behind)
    target = lowest + 1
    reference = _first_entry_at(group, ahead, target) or _first_entry_at(group, ahead, front)
    what = f" ({_entries_text([reference])})" if reference and reference.collective_seq_id == target else ""
    parts = [
        f"{ranks_text([r])} last entered seq {last[r]}" if last[r] else f"{ranks_text([r])} entered none"
        for r in behind[:4]
    ]
    if len(behind) > 4:
        parts.append(f"{len(behind) - 4} more behind")
    text = (
        f"{_pg_text(group)} seq {target}: {', '.join(parts)}; {ranks_text(ahead)} reached seq {front} - "
        f"seq {target}{what} was never entered by {ranks_text(r for r in behind if last[r] == lowest)}"
    )
    first = behind[0]
    own = group.by_rank.get(first, {})
    frames = own[max(own)][-1].frames if own else ()
    return FRFinding(
        kind="missing-rank",
        pg_name=group.name,
        pg_desc=group.desc,
        collective_seq_id=target,
        ranks=tuple(behind),
        others=ahead,
        differs=(),
        evidence=_cut(text),
        frames=frames,
        time_ns=(reference.time_created_ns or None) if reference else None,
    )


def _last_seq(group: _Group, rank: int, dump: FlightRecorderDump) -> int:
    """The last sequence number the rank entered: its newest entry, or pg_status when newer."""
    own = group.by_rank.get(rank, {})
    last = max(own) if own else 0
    pg_id = group.pg_ids.get(rank)
    for status in dump.pg_status:
        if status.last_enqueued is None:
            continue
        if (pg_id is not None and status.pg_id == str(pg_id)) or (pg_id is None and status.pg_id == group.name):
            last = max(last, status.last_enqueued)
    return last


def _first_entry_at(group: _Group, ranks: Iterable[int], seq: int) -> FREntry | None:
    for rank in ranks:
        entries = group.by_rank.get(rank, {}).get(seq)
        if entries:
            return entries[0]
    return None


def _missing_dumps(dumps: Mapping[int, FlightRecorderDump]) -> tuple[int, ...]:
    """Ranks below the highest rank seen, or listed in a pg_config, without a dump (bounded scan)."""
    if not dumps:
        return ()
    limit = len(dumps) + _MAX_MISSING_SCAN  # a stray huge rank number must not make us scan billions
    missing = {r for r in range(min(max(dumps) + 1, limit)) if r not in dumps}
    for dump in dumps.values():
        for config in dump.pg_config:
            missing.update(r for r in config.ranks or () if 0 <= r < limit and r not in dumps)
    return tuple(sorted(missing))


def _not_completed(dumps: Mapping[int, FlightRecorderDump]) -> tuple[FRStuckEntry, ...]:
    out: list[FRStuckEntry] = []
    for rank in sorted(dumps):
        seen: set[str] = set()
        for entry in dumps[rank].entries:
            if entry.completed or entry.pg_name in seen:
                continue
            seen.add(entry.pg_name)
            seq = entry.p2p_seq_id if entry.is_p2p else entry.collective_seq_id
            out.append(
                FRStuckEntry(rank, entry.pg_name, entry.pg_desc, seq, entry.op, entry.state, entry.is_p2p, entry.frames)
            )
    return tuple(out)


def _stuck_frames(main: FRFinding, not_completed: Sequence[FRStuckEntry]) -> tuple[FRFrame, ...]:
    """The mismatching entry's stack; for a lagging rank, where it is stuck (if anywhere) else its last entry."""
    if main.kind == "missing-rank":
        for stuck in not_completed:
            if stuck.rank == main.ranks[0] and stuck.frames:
                return stuck.frames
    return main.frames


def _stuck_text(stuck: FRStuckEntry) -> str:
    where = f" at {stuck.frames[-1].filename}:{stuck.frames[-1].line}" if stuck.frames else ""
    kind = "p2p seq" if stuck.is_p2p else "seq"
    return _cut(
        f"rank {stuck.rank}: {stuck.op} ({stuck.state}, not completed) on {_pg_label(stuck.pg_name, stuck.pg_desc)} "
        f"{kind} {stuck.collective_seq_id}{where}"
    )


def _pg_label(name: str, desc: str) -> str:
    label = f"pg {name or '?'}"
    return f"{label} ({desc})" if desc and desc not in ("undefined", name) else label


def _pg_text(group: _Group) -> str:
    return _pg_label(group.name, group.desc)


def _entries_text(entries: Sequence[FREntry]) -> str:
    parts = []
    for e in entries[:3]:
        text = e.op + (f" {_sizes_text(e.input_sizes)}" if e.input_sizes else "")
        if e.input_dtypes and len(set(e.input_dtypes)) == 1 and e.input_dtypes[0] not in ("Float", "float32"):
            text += f" {e.input_dtypes[0]}"
        parts.append(text)
    if len(entries) > 3:
        parts.append(f"{len(entries) - 3} more")
    return " + ".join(parts)


def _sizes_text(sizes: tuple[tuple[int, ...], ...]) -> str:
    shown = ",".join("[" + ",".join(str(d) for d in s[:6]) + (",..." if len(s) > 6 else "") + "]" for s in sizes[:4])
    return f"[{shown}{',...' if len(sizes) > 4 else ''}]"


def _cut(text: str) -> str:
    return text if len(text) <= 3 * _MAX_TEXT else text[: 3 * _MAX_TEXT - 3] + "..."


def _frame_dict(frame: FRFrame) -> dict[str, Any]:
    return {"name": frame.name, "filename": frame.filename, "line": frame.line}
