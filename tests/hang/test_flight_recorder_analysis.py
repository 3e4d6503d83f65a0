"""Cross-rank analysis of Flight Recorder dumps: real gloo dumps, then edge cases built in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.errors import InvalidInputError
from denpex_ml.hang.flight_recorder import FlightRecorderFindings, analyse_flight_recorder
from denpex_ml.logs.flight_recorder import (
    FlightRecorderDump,
    FREntry,
    FRFrame,
    FRGroupConfig,
    FRGroupStatus,
    read_flight_recorder,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"


def load(scenario: str, fmt: str = "pickle", ranks: tuple[int, ...] = (0, 1, 2, 3)) -> dict[int, FlightRecorderDump]:
    out = {}
    for rank in ranks:
        path = FIXTURES / scenario / f"fr_trace_rank_{rank}{'.json' if fmt == 'json' else ''}"
        dump = read_flight_recorder(path.read_bytes(), source=path.name)
        assert dump.rank is not None
        out[dump.rank] = dump
    return out


def entry(
    seq: int,
    op: str = "all_reduce",
    sizes: tuple[tuple[int, ...], ...] = ((4,),),
    *,
    pg: str = "0",
    desc: str = "default_pg",
    state: str = "completed",
    dtype: str = "Float",
    p2p: bool = False,
    frames: tuple[FRFrame, ...] = (),
) -> FREntry:
    return FREntry(
        record_id=seq,
        pg_id=int(pg) if pg.isdigit() else 9,
        pg_name=pg,
        pg_desc=desc,
        collective_seq_id=0 if p2p else seq,
        p2p_seq_id=seq if p2p else 0,
        op=op,
        backend="nccl",
        profiling_name=f"nccl:{op}",
        input_sizes=sizes,
        output_sizes=sizes,
        input_dtypes=(dtype,) * len(sizes),
        output_dtypes=(dtype,) * len(sizes),
        state=state,
        retired=False,
        is_p2p=p2p,
        time_created_ns=1_000 + seq,
        time_started_ns=None,
        time_completed_ns=None,
        timeout_ms=600_000,
        frames=frames,
    )


def dump(rank: int, entries: list[FREntry], **kwargs: Any) -> FlightRecorderDump:
    fields: dict[str, Any] = {
        "version": "2.10",
        "pg_config": (),
        "pg_status": (),
        "source": f"r{rank}",
        "format": "pickle",
    }
    fields.update(kwargs)
    return FlightRecorderDump(rank=rank, entries=tuple(entries), **fields)


def healthy(n: int, world: int = 4) -> dict[int, FlightRecorderDump]:
    return {r: dump(r, [entry(s) for s in range(1, n + 1)]) for r in range(world)}


# -- real dumps --------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_healthy_run_has_no_finding(fmt: str) -> None:
    found = analyse_flight_recorder(load("healthy", fmt))
    assert found.ok
    assert (found.kind, found.blamed_ranks, found.findings, found.missing_dumps) == (None, (), (), ())
    assert found.not_completed == ()
    assert found.ranks == (0, 1, 2, 3)
    assert found.evidence == ()


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_op_mismatch_blames_rank_2(fmt: str) -> None:
    found = analyse_flight_recorder(load("mismatch", fmt))
    assert (found.kind, found.blamed_ranks) == ("mismatch", (2,))
    main = found.findings[0]
    assert (main.pg_name, main.collective_seq_id, main.others) == ("0", 4, (0, 1, 3))
    assert "op" in main.differs
    assert found.evidence[0] == "pg 0 (default_pg) seq 4: rank 2 all_gather [[4]] vs ranks 0, 1, 3 all_reduce [[4]]"
    if fmt == "pickle":
        assert found.frames[0].name == "all_gather"
        assert found.frames[-1].filename.endswith("make_dumps.py")
    else:
        assert found.frames == ()


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_size_mismatch_blames_rank_1(fmt: str) -> None:
    found = analyse_flight_recorder(load("size_mismatch", fmt))
    assert (found.kind, found.blamed_ranks) == ("mismatch", (1,))
    main = found.findings[0]
    assert main.collective_seq_id == 4
    assert "input_sizes" in main.differs and "op" not in main.differs
    assert "rank 1 all_reduce [[8]] vs ranks 0, 2, 3 all_reduce [[4]]" in main.evidence


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_missing_rank_blames_rank_3(fmt: str) -> None:
    found = analyse_flight_recorder(load("missing", fmt))
    assert (found.kind, found.blamed_ranks) == ("missing-rank", (3,))
    main = found.findings[0]
    assert (main.pg_name, main.collective_seq_id, main.others) == ("0", 4, (0, 1, 2))
    assert "rank 3 last entered seq 3" in main.evidence
    assert "never entered by rank 3" in main.evidence
    assert [f.kind for f in found.findings] == ["missing-rank"]
    if fmt == "pickle":
        assert found.frames and found.frames[0].name == "all_reduce"


def test_real_missing_dump_is_reported_and_blamed_when_nothing_else_is() -> None:
    found = analyse_flight_recorder(load("healthy", ranks=(0, 1, 3)))
    assert (found.kind, found.blamed_ranks, found.missing_dumps) == ("missing-dump", (2,), (2,))
    assert found.evidence == ("no Flight Recorder dump from rank 2 (dumps from ranks 0, 1, 3)",)


def test_missing_dump_does_not_hide_the_mismatch() -> None:
    found = analyse_flight_recorder(load("mismatch", ranks=(0, 2, 3)))
    assert (found.kind, found.blamed_ranks, found.missing_dumps) == ("mismatch", (2,), (1,))
    assert [f.kind for f in found.findings] == ["mismatch", "missing-dump"]


def test_pickle_and_json_give_the_same_findings_and_to_dict_is_json() -> None:
    for scenario in ("mismatch", "size_mismatch", "missing"):
        a, b = analyse_flight_recorder(load(scenario)), analyse_flight_recorder(load(scenario, "json"))
        assert (a.kind, a.blamed_ranks, a.evidence[0]) == (b.kind, b.blamed_ranks, b.evidence[0])
        as_dict = json.loads(json.dumps(a.to_dict()))
        assert as_dict["blamed_ranks"] == list(a.blamed_ranks)
        assert as_dict["findings"][0]["kind"] == a.kind
        assert analyse_flight_recorder(load(scenario)) == a  # deterministic


# -- built in memory ---------------------------------------------------------------------


def test_no_majority_blames_no_one() -> None:
    dumps = {0: dump(0, [entry(1), entry(2)]), 1: dump(1, [entry(1), entry(2, "broadcast")])}
    found = analyse_flight_recorder(dumps)
    assert (found.kind, found.blamed_ranks) == ("mismatch", ())
    assert found.findings[0].ranks == ()
    assert "no majority" in found.evidence[0]


def test_a_finding_that_blames_someone_comes_first() -> None:
    dumps = {
        0: dump(0, [entry(1, pg="7", desc="tp"), entry(1, pg="8", desc="dp"), entry(2, pg="8", desc="dp")]),
        1: dump(
            1, [entry(1, "broadcast", pg="7", desc="tp"), entry(1, pg="8", desc="dp"), entry(2, pg="8", desc="dp")]
        ),
        2: dump(2, [entry(1, pg="8", desc="dp")]),
    }
    found = analyse_flight_recorder(dumps)
    assert [f.kind for f in found.findings] == ["missing-rank", "mismatch"]
    assert (found.kind, found.blamed_ranks) == ("missing-rank", (2,))
    assert found.evidence[0].startswith("pg 8 (dp) seq 2: rank 2 last entered seq 1")


def test_only_the_first_mismatch_of_a_group_is_reported() -> None:
    dumps = healthy(3)
    dumps[1] = dump(1, [entry(1), entry(2, dtype="BFloat16"), entry(3, "all_gather")])
    found = analyse_flight_recorder(dumps)
    assert len(found.findings) == 1
    main = found.findings[0]
    assert (main.collective_seq_id, main.ranks, main.differs) == (2, (1,), ("input_dtypes", "output_dtypes"))
    assert "rank 1 all_reduce [[4]] BFloat16 vs ranks 0, 2, 3 all_reduce [[4]]" in main.evidence


def test_shapes_are_not_compared_where_they_may_differ() -> None:
    dumps = {r: dump(r, [entry(1, "all_to_all", ((r + 1, 8),)), entry(2, "gather", ((4,),) * r)]) for r in range(4)}
    assert analyse_flight_recorder(dumps).ok


def test_subgroups_only_expect_their_members() -> None:
    dumps = healthy(2)
    for r in (0, 1):
        dumps[r] = dump(r, [*dumps[r].entries, entry(1, pg="7", desc="tp")])
    assert analyse_flight_recorder(dumps).ok


def test_pg_config_members_that_never_entered_are_missing() -> None:
    config = (FRGroupConfig("7", "tp", (0, 1, 2)),)
    dumps = {r: dump(r, [entry(1, pg="7", desc="tp")] if r < 2 else [], pg_config=config) for r in range(3)}
    found = analyse_flight_recorder(dumps)
    assert (found.kind, found.blamed_ranks) == ("missing-rank", (2,))
    assert "rank 2 entered none" in found.evidence[0]


def test_ring_buffer_windows_that_start_at_different_seqs_are_fine() -> None:
    dumps = {0: dump(0, [entry(s) for s in range(10, 20)]), 1: dump(1, [entry(s) for s in range(5, 20)])}
    assert analyse_flight_recorder(dumps).ok


def test_pg_status_counts_collectives_evicted_from_the_buffer() -> None:
    status = (FRGroupStatus("0", last_enqueued=20, last_started=20, last_completed=19),)
    dumps = {0: dump(0, [entry(s) for s in range(1, 21)]), 1: dump(1, [entry(1)], pg_status=status)}
    assert analyse_flight_recorder(dumps).ok


def test_lagging_ranks_and_their_stuck_entry_elsewhere() -> None:
    stuck = (FRFrame("all_gather", "c10d.py", 10), FRFrame("step", "train.py", 42))
    dumps = healthy(6)
    dumps[2] = dump(
        2, [*(entry(s) for s in range(1, 5)), entry(1, "all_gather", pg="3", desc="dp", state="started", frames=stuck)]
    )
    dumps[3] = dump(3, [entry(s) for s in range(1, 6)])
    found = analyse_flight_recorder(dumps)
    assert found.kind == "missing-rank"
    assert found.blamed_ranks == (2, 3)
    assert found.findings[0].collective_seq_id == 5
    assert "never entered by rank 2" in found.findings[0].evidence
    assert found.frames == stuck  # where rank 2 is stuck: another group's collective
    assert any(
        e == "rank 2: all_gather (started, not completed) on pg 3 (dp) seq 1 at train.py:42" for e in found.evidence
    )


def test_not_completed_lists_the_oldest_open_entry_per_rank_and_group() -> None:
    dumps = {
        r: dump(
            r,
            [
                entry(1),
                entry(2, state="started"),
                entry(3, state="scheduled"),
                entry(1, "send", p2p=True, pg="5", state="scheduled"),
            ],
        )
        for r in range(2)
    }
    found = analyse_flight_recorder(dumps)
    assert found.ok  # everyone is in the same collective: no rank is odd
    assert [(s.rank, s.pg_name, s.collective_seq_id, s.op, s.state, s.is_p2p) for s in found.not_completed] == [
        (0, "0", 2, "all_reduce", "started", False),
        (0, "5", 1, "send", "scheduled", True),
        (1, "0", 2, "all_reduce", "started", False),
        (1, "5", 1, "send", "scheduled", True),
    ]
    assert json.dumps(found.to_dict())


def test_many_ranks_are_summarised_as_ranges() -> None:
    dumps = {r: dump(r, [entry(1), entry(2)] if r != 700 else [entry(1)]) for r in range(1024)}
    found = analyse_flight_recorder(dumps)
    assert found.blamed_ranks == (700,)
    assert "ranks 0-699, 701-1023 reached seq 2" in found.evidence[0]


def test_large_dumps_stay_linear() -> None:
    n = 20_000
    dumps = {r: dump(r, [entry(s) for s in range(1, n + 1 - (r == 3))]) for r in range(4)}
    found = analyse_flight_recorder(dumps)
    assert (found.kind, found.blamed_ranks, found.findings[0].collective_seq_id) == ("missing-rank", (3,), n)


def test_empty_input() -> None:
    found = analyse_flight_recorder({})
    assert isinstance(found, FlightRecorderFindings)
    assert found.ok and found.ranks == ()


@pytest.mark.parametrize("bad", [{-1: None}, {"0": None}, {True: None}, {0: "not a dump"}])
def test_invalid_input(bad: dict[Any, Any]) -> None:
    with pytest.raises(InvalidInputError):
        analyse_flight_recorder(bad)
