"""Reading Flight Recorder dumps: real gloo dumps in both formats, and every hostile input refused."""

from __future__ import annotations

import io
import json
import os
import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.errors import DenpexError, FlightRecorderError
from denpex_ml.logs.flight_recorder import (
    FlightRecorderDump,
    FRFrame,
    looks_like_flight_recorder,
    rank_from_name,
    read_flight_recorder,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flight_recorder"
SCENARIOS = ("healthy", "mismatch", "size_mismatch", "missing")


def fixture(scenario: str, rank: int, fmt: str = "pickle") -> Path:
    return FIXTURES / scenario / f"fr_trace_rank_{rank}{'.json' if fmt == 'json' else ''}"


def read(path: Path, **kwargs: Any) -> FlightRecorderDump:
    return read_flight_recorder(path.read_bytes(), source=str(path), **kwargs)


def minimal(**extra: Any) -> dict[str, Any]:
    entry = {"profiling_name": "nccl:all_reduce", "collective_seq_id": 3, "process_group": ("0", "default_pg")}
    return {"version": "2.10", "entries": [entry], **extra}


# -- the real dumps ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["pickle", "json"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_real_dumps_are_read_in_both_formats(scenario: str, fmt: str) -> None:
    for rank in range(4):
        dump = read(fixture(scenario, rank, fmt))
        assert dump.rank == rank  # from the file name: torch 2.13 writes no rank into the dump
        assert dump.format == fmt
        assert dump.version == "2.10"
        assert dump.entries
        first = dump.entries[0]
        assert (first.backend, first.op, first.pg_name, first.pg_desc) == ("gloo", "all_reduce", "0", "default_pg")
        assert first.collective_seq_id == 1
        assert first.input_sizes == ((4,),)
        assert first.input_dtypes == ("Float",)
        assert first.timeout_ms == 5000
        assert not first.is_p2p
        assert first.time_created_ns > 0
        assert first.time_completed_ns is None  # JSON writes 0 for "not discovered"
        assert {s.pg_id for s in dump.pg_status} >= {"0"}
        if fmt == "pickle":
            assert isinstance(first.frames[0], FRFrame)
            assert first.frames[0].name == "all_reduce"
            assert first.frames[0].line > 0
        else:
            assert first.frames == ()  # _dump_fr_trace_json carries no stacks


def test_both_formats_agree_on_the_entries() -> None:
    pkl, js = read(fixture("mismatch", 2)), read(fixture("mismatch", 2, "json"))
    assert [(e.op, e.collective_seq_id, e.input_sizes, e.output_sizes) for e in pkl.entries] == [
        (e.op, e.collective_seq_id, e.input_sizes, e.output_sizes) for e in js.entries
    ]
    assert pkl.entries[-1].op == "all_gather"


def test_subgroup_and_pg_status_of_the_healthy_dump() -> None:
    dump = read(fixture("healthy", 0))
    assert [(e.pg_name, e.op) for e in dump.entries if e.pg_name != "0"] == [("1", "all_reduce")]
    assert all(e.completed for e in dump.entries)  # gloo leaves state "scheduled" but retires finished work
    assert {s.pg_id: s.last_completed for s in dump.pg_status} == {"0": 4, "1": 1}
    assert dump.pg_config[0].ranks == ()  # torch writes "[]" here for gloo


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_dumps_look_like_flight_recorder(fmt: str) -> None:
    head = fixture("missing", 1, fmt).read_bytes()[:4096]
    assert looks_like_flight_recorder(head, "anything.bin")
    assert looks_like_flight_recorder(head, "fr_trace_rank_1")


@pytest.mark.parametrize(
    ("head", "name", "expected"),
    [
        (b"[rank0]:[E] Watchdog caught collective operation timeout", "rank0.log", False),
        (b'{"loss": 2.0, "step": 10}', "metrics.json", False),
        (b'{"entries": []}', "nccl_trace_rank_0.json", True),
        (b"\x80\x04\x95\x10\x00\x00\x00", "nccl_trace_rank_3", True),
        (b"\x80\x04\x95\x10\x00\x00\x00", "model.pt", False),
        (b"", "fr_trace_rank_0", False),
    ],
)
def test_looks_like_flight_recorder(head: bytes, name: str, expected: bool) -> None:
    assert looks_like_flight_recorder(head, name) is expected


@pytest.mark.parametrize(
    ("name", "rank"),
    [("fr_trace_rank_3", 3), ("a/b/nccl_trace_rank_12.json", 12), ("dump.pkl", None), ("r7.pickle", 7)],
)
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_rank_from_the_dump_or_the_caller_wins_over_the_name() -> None:
    data = pickle.dumps(minimal(rank=5), protocol=4)
    assert read_flight_recorder(data, source="fr_trace_rank_1").rank == 5
    assert read_flight_recorder(data, source="fr_trace_rank_1", rank=9).rank == 9
    assert read_flight_recorder(pickle.dumps(minimal()), source="dump").rank is None


def test_unknown_keys_and_missing_optional_fields_are_tolerated() -> None:
    tree = minimal(future_key={"x": [1, 2]}, pg_config={"0": {"ranks": "[0, 1]", "extra": 1}})
    tree["entries"][0]["brand_new_field"] = 3.5
    tree["entries"].append({"profiling_name": "send", "seq_id": 2, "is_p2p": True})  # version 1 name of the seq id
    dump = read_flight_recorder(json.dumps(tree).encode(), source="fr_trace_rank_0.json")
    e0, e1 = dump.entries
    assert (e0.op, e0.state, e0.frames, e0.input_sizes, e0.timeout_ms) == ("all_reduce", "unknown", (), (), None)
    assert (e1.op, e1.backend, e1.collective_seq_id, e1.pg_name, e1.is_p2p) == ("send", "", 2, "", True)
    assert dump.pg_config[0].ranks == (0, 1)


def test_p2p_profiling_name_keeps_only_the_op() -> None:
    tree = minimal()
    tree["entries"][0]["profiling_name"] = "nccl:send 0->1"
    assert read_flight_recorder(pickle.dumps(tree), source="x").entries[0].op == "send"


def test_long_shared_strings_are_cut_once() -> None:
    long = "f" * 10_000
    tree = minimal()
    tree["entries"] = [dict(tree["entries"][0], frames=[{"name": "x", "filename": long, "line": 1}]) for _ in range(3)]
    dump = read_flight_recorder(pickle.dumps(tree), source="x")
    names = [e.frames[0].filename for e in dump.entries]
    assert len(names[0]) < 1100 and names[0] is names[1] is names[2]


# -- hostile pickles: nothing in them may run -------------------------------------------


class _SystemCall:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


class _Eval:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        import builtins

        return (builtins.eval, (self.code,))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_reduce_payload_with_os_system_is_refused_and_never_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(minimal(payload=_SystemCall(f"touch {marker}")), protocol=protocol)
    with pytest.raises(FlightRecorderError, match=r"fr_trace_rank_0: .*names the Python object .*system"):
        read_flight_recorder(data, source="fr_trace_rank_0")
    assert not marker.exists()
    assert b"system" in data  # the payload really is in there


def test_top_level_payload_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = pickle.dumps(_SystemCall(f"touch {marker}"), protocol=2)
    with pytest.raises(FlightRecorderError):
        read_flight_recorder(data, source="evil")
    assert not marker.exists()


def test_builtins_eval_payload_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    code = f"open({str(marker)!r}, 'w').write('x')"
    data = pickle.dumps(minimal(entries=[_Eval(code)]), protocol=4)
    with pytest.raises(FlightRecorderError, match=r"builtins\.eval"):
        read_flight_recorder(data, source="evil.pkl")
    assert not marker.exists()


def test_class_instances_and_harmless_looking_globals_are_refused() -> None:
    from collections import OrderedDict

    with pytest.raises(FlightRecorderError, match=r"collections\.OrderedDict"):
        read_flight_recorder(pickle.dumps(OrderedDict(minimal())), source="x")
    with pytest.raises(FlightRecorderError, match="names the Python object"):
        read_flight_recorder(pickle.dumps(minimal(when=FRFrame("a", "b", 1))), source="x")


def test_persistent_ids_are_refused() -> None:
    class WithPid(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return "tensor-0" if obj == "marker" else None

    buf = io.BytesIO()
    WithPid(buf, protocol=2).dump(minimal(x="marker"))
    with pytest.raises(FlightRecorderError, match="persistent ids"):
        read_flight_recorder(buf.getvalue(), source="x")


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x02}r\x80\x96\x98\x00.",  # LONG_BINPUT 10_000_000: the C unpickler sizes its memo array by it
        b"\x80\x02}p10000000\n.",  # PUT, the text form
    ],
)
def test_huge_memo_indices_allocate_nothing(data: bytes) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(FlightRecorderError, match="missing key 'version'"):
            read_flight_recorder(data, source="memo")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024**2  # the C unpickler would allocate and clear 160 MB here (64 GiB for 2**32-1)


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x02(cos\nsystem\nX\x04\x00\x00\x00trueo.",  # OBJ after GLOBAL
        b"\x80\x02(X\x04\x00\x00\x00trueios\nsystem\n.",  # INST names the class inline
        b"\x80\x02\x82\x01.",  # EXT1: a global through the copyreg extension registry
    ],
)
def test_every_opcode_that_reaches_a_global_is_refused(data: bytes) -> None:
    with pytest.raises(FlightRecorderError):
        read_flight_recorder(data, source="x")


def test_shared_references_cannot_blow_up_the_reading() -> None:
    frame = {"name": "f", "filename": "g", "line": 1}
    entry = {"profiling_name": "nccl:all_reduce", "collective_seq_id": 1, "frames": [frame] * 5_000}
    data = pickle.dumps({"version": "2.10", "entries": [entry] * 50_000}, protocol=4)
    assert len(data) < 300_000  # 250 million frames described in a few hundred KB
    with pytest.raises(FlightRecorderError, match="far more values than its size allows"):
        read_flight_recorder(data, source="bomb")


# -- malformed input ---------------------------------------------------------------------


def test_truncated_pickle(tmp_path: Path) -> None:
    data = fixture("healthy", 0).read_bytes()
    for cut in (1, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(FlightRecorderError, match=r"fr_trace_rank_0: corrupt or truncated pickle"):
            read_flight_recorder(data[:cut], source="fr_trace_rank_0")


def test_corrupt_pickle() -> None:
    data = bytearray(fixture("healthy", 0).read_bytes())
    data[2:40] = b"\xff" * 38
    with pytest.raises(FlightRecorderError, match="corrupt or truncated"):
        read_flight_recorder(bytes(data), source="x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a Flight Recorder dump"),
        (b"hello world", "not a Flight Recorder dump"),
        (b"{not json", "invalid JSON"),
        (b'{"version": "2.10", "entries": [1, 2', "invalid JSON"),
        (b'{"version": "2.10", "entries": [\xff]}', "invalid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not a Flight Recorder dump"),
        (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
    ],
)
def test_not_a_dump(data: bytes, message: str) -> None:
    with pytest.raises(FlightRecorderError, match=message):
        read_flight_recorder(data, source="x")


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ([1, 2, 3], "top level: expected a dict, got list|not a Flight Recorder dump"),
        ({"version": "2.10"}, "missing key 'entries'"),
        ({"entries": []}, "missing key 'version'"),
        ({"version": "2.10", "entries": {"a": 1}}, "entries: expected a list, got dict"),
        ({"version": ["2"], "entries": []}, "version: expected a string"),
        ({"version": "2", "entries": ["x"]}, "entry 0: expected a dict, got str"),
        ({"version": "2", "entries": [{"collective_seq_id": 1}]}, "entry 0: missing field 'profiling_name'"),
        ({"version": "2", "entries": [{"profiling_name": "nccl:x"}]}, "missing field 'collective_seq_id'"),
        (
            {"version": "2", "entries": [{"profiling_name": "x", "collective_seq_id": "one"}]},
            "field 'collective_seq_id': expected an integer",
        ),
        (
            {"version": "2", "entries": [{"profiling_name": "x", "collective_seq_id": 1, "input_sizes": "abc"}]},
            "field 'input_sizes': expected a list of shapes",
        ),
        (
            {"version": "2", "entries": [{"profiling_name": "x", "collective_seq_id": 1, "input_sizes": [["4"]]}]},
            "holds something other than integers",
        ),
        (
            {"version": "2", "entries": [{"profiling_name": "x", "collective_seq_id": 1, "retired": "yes"}]},
            "field 'retired': expected true/false",
        ),
        (
            {"version": "2", "entries": [{"profiling_name": "x", "collective_seq_id": 1, "process_group": 7}]},
            "field 'process_group': expected a pair of strings",
        ),
        ({"version": "2", "entries": [], "pg_config": [1]}, "pg_config: expected a dict"),
        ({"version": "2", "entries": [], "pg_status": {"0": 1}}, r"pg_status\['0'\]: expected a dict"),
    ],
)
@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_wrong_types_and_missing_keys(tree: Any, message: str, fmt: str) -> None:
    data = pickle.dumps(tree, protocol=2) if fmt == "pickle" else json.dumps(tree).encode()
    with pytest.raises(FlightRecorderError, match=message) as info:
        read_flight_recorder(data, source="fr_trace_rank_4")
    assert str(info.value).startswith("fr_trace_rank_4: ")


def test_too_big_and_too_many_entries() -> None:
    data = fixture("healthy", 0).read_bytes()
    with pytest.raises(FlightRecorderError, match=r"more than the 100 accepted"):
        read_flight_recorder(data, source="x", max_bytes=100)
    with pytest.raises(FlightRecorderError, match=r"5 entries is more than the 2 accepted"):
        read_flight_recorder(data, source="x", max_entries=2)


def test_non_bytes_input() -> None:
    with pytest.raises(FlightRecorderError, match="expected the dump as bytes, got str"):
        read_flight_recorder("{}", source="x")  # type: ignore[arg-type]


def test_error_is_a_denpex_error_and_a_value_error() -> None:
    assert issubclass(FlightRecorderError, DenpexError)
    assert issubclass(FlightRecorderError, ValueError)
