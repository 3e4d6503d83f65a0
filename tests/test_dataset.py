"""Tests of denpex_ml.dataset: the incident format, loading, Hugging Face round trips, grouped splits."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from denpex_ml.dataset import (
    Incident,
    check_grouped_split,
    check_log_key,
    check_new_threads,
    from_hf_dataset,
    group_kfold,
    load_incidents,
    source_group,
    source_groups,
    to_hf_dataset,
    train_test_split_grouped,
    write_jsonl,
)
from denpex_ml.dataset.split import paste_key
from denpex_ml.errors import DatasetError, DatasetLabelError, UnknownLabelError

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "dataset"
REAL_LOGS = REPO / "data" / "real" / "real-logs.jsonl"
SHARED = REPO.parent / "shared"
CONTRACT = SHARED / "taxonomy-ids.md"
SHARED_REAL_LOGS = SHARED / "real-logs" / "real-logs.jsonl"

LABELS = frozenset({"cuda-oom", "host-oom", "nccl-shm-p2p-failure", "nccl-network-error"})


def contract_ids() -> frozenset[str]:
    """Ids of the label contract: its ``- some-id: ...`` lines."""
    if not CONTRACT.is_file():
        pytest.skip(f"label contract {CONTRACT} not present")
    text = CONTRACT.read_text(encoding="utf-8")
    return frozenset(re.findall(r"^- ([a-z0-9]+(?:-[a-z0-9]+)*):", text, flags=re.MULTILINE))


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "r1",
        "label": "cuda-oom",
        "log": "CUDA out of memory",
        "source": "https://github.com/o/r/issues/1",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not _ABSENT}


_ABSENT = object()


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def make_incidents(n_groups: int, per_group: int, labels: tuple[str, ...] = ("cuda-oom", "host-oom")) -> list[Incident]:
    out = []
    for g in range(n_groups):
        for j in range(per_group):
            out.append(
                Incident(
                    id=f"g{g}-{j}",
                    label=labels[(g + j) % len(labels)],
                    log=f"log {g} {j}",
                    # alternate URL spellings of one thread: they must group together
                    source=f"https://github.com/Org/Repo/{'pull' if j % 2 else 'issues'}/{g}#c{j}",
                )
            )
    return out


# --------------------------------------------------------------------------- Incident


def test_incident_dict_round_trip() -> None:
    raw = {
        "id": "a",
        "label": "nccl-network-error",
        "logs": {"0": "x", "node-a/worker-2.log": "y"},
        "initiating_rank": 0,
        "source": "synthetic:ib-flap:3",
        "meta": {"title": "t", "nested": {"k": [1, 2]}},
    }
    inc = Incident.from_dict(raw, labels=LABELS)
    assert inc.to_dict() == raw
    assert Incident.from_dict(inc.to_dict(), labels=LABELS) == inc
    assert hash(inc) == hash(Incident.from_dict(raw))


def test_incident_copies_its_mappings() -> None:
    logs = {"0": "x"}
    inc = Incident(id="a", label="cuda-oom", logs=logs, source="s")
    logs["1"] = "y"
    assert inc.logs == {"0": "x"}


def test_null_optional_fields_count_as_absent() -> None:
    inc = Incident.from_dict(record(logs=None, meta=None, initiating_rank=None))
    assert inc.log == "CUDA out of memory" and inc.logs is None and inc.meta == {}


def test_direct_construction_is_validated() -> None:
    with pytest.raises(DatasetError, match=r"incident 'a': field log: empty log"):
        Incident(id="a", label="cuda-oom", log="  \n", source="s")


@pytest.mark.parametrize(
    ("source", "group"),
    [
        ("https://github.com/org/repo/issues/12#issuecomment-3", "github.com/org/repo/12"),
        ("https://github.com/org/repo/pull/12", "github.com/org/repo/12"),
        ("https://www.github.com/Org/Repo/pull/12/files?w=1", "github.com/org/repo/12"),
        ("http://github.com/org/repo/discussions/12", "github.com/org/repo/12"),
        ("https://github.com/org/repo/issues/13", "github.com/org/repo/13"),
        ("https://gitlab.com/g/p/-/issues/4#note_1", "gitlab.com/g/p/-/issues/4"),
        ("https://discuss.pytorch.org/t/nccl-hang/123?page=2", "discuss.pytorch.org/t/nccl-hang/123"),
        ("synthetic:nccl-timeout:7", "synthetic:nccl-timeout:7"),
        ("synthetic:nccl-timeout:7:42", "synthetic:nccl-timeout:7"),
        ("  Pasted by  On-call ", "pasted by on-call"),
    ],
)
def test_source_group(source: str, group: str) -> None:
    assert source_group(source) == group


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("0", True),
        ("13", True),
        ("rank3.log", True),
        ("node-a/worker-2.log", True),
        ("-1", False),
        ("03", False),
        ("", False),
        (" 3", False),
        ("../rank0.log", False),
        ("a/../b.log", False),
        ("/var/log/rank0.log", False),
        ("C:/logs/rank0.log", False),
        ("node-a\\rank0.log", False),
        ("a//b.log", False),
        (3, False),
    ],
)
def test_check_log_key(key: object, ok: bool) -> None:
    assert (check_log_key(key) is None) is ok


# --------------------------------------------------------------------------- validation errors

INVALID_RECORDS: list[tuple[str, dict[str, Any], str, str]] = [
    # (case name, record, field named in the message, message fragment)
    ("unknown label", record(label="cuda-oomm"), "label", "did you mean 'cuda-oom'"),
    ("empty log", record(log="   "), "log", "empty log"),
    ("empty logs entry", record(log=None, logs={"0": "x", "1": ""}), "logs['1']", "empty log"),
    ("empty logs mapping", record(log=None, logs={}), "logs", "empty"),
    ("both log and logs", record(logs={"0": "x"}), "log", "not both"),
    ("neither log nor logs", record(log=_ABSENT), "log", "missing"),
    ("negative rank key", record(log=None, logs={"-1": "x"}), "logs", "negative"),
    ("dotdot rank key", record(log=None, logs={"../x.log": "x"}), "logs", "'..'"),
    ("absolute key", record(log=None, logs={"/x.log": "x"}), "logs", "absolute"),
    ("id not a string", record(id=7), "id", "expected a string, found int"),
    ("label not a string", record(label=["cuda-oom"]), "label", "expected a string, found list"),
    ("log not a string", record(log=5), "log", "expected a string, found int"),
    ("logs not an object", record(log=None, logs=["x"]), "logs", "found list"),
    ("logs value not a string", record(log=None, logs={"0": 1}), "logs['0']", "found int"),
    ("rank as string", record(initiating_rank="3"), "initiating_rank", "integer >= 0"),
    ("rank negative", record(initiating_rank=-2), "initiating_rank", "integer >= 0"),
    ("rank bool", record(initiating_rank=True), "initiating_rank", "integer >= 0"),
    ("healthy job with a rank", record(label="no-failure", initiating_rank=0), "initiating_rank", "no failing rank"),
    ("meta not an object", record(meta=[1]), "meta", "expected an object"),
    ("missing source", record(source=_ABSENT), "source", "missing required field"),
    ("empty source", record(source=" "), "source", "must not be empty"),
    ("bad synthetic source", record(source="synthetic:recipe"), "source", "synthetic:<recipe>:<seed>"),
    ("typo field", record(lable="x"), "lable", "did you mean 'label'"),
]


@pytest.mark.parametrize(("case", "raw", "field", "fragment"), INVALID_RECORDS, ids=[c[0] for c in INVALID_RECORDS])
def test_invalid_record_names_file_line_id_and_field(
    tmp_path: Path, case: str, raw: dict[str, Any], field: str, fragment: str
) -> None:
    good = json.dumps(record(id="good"))
    path = write_lines(tmp_path / "data.jsonl", [good, "", json.dumps(raw)])
    with pytest.raises(DatasetError) as info:
        load_incidents(path, labels=LABELS)
    message = str(info.value)
    assert f"{path}:3" in message, message
    if isinstance(raw.get("id"), str):
        assert f"(id {raw['id']!r})" in message, message
    assert f"field {field}:" in message, message
    assert fragment in message, message
    assert "good" not in message


def test_unknown_label_error_is_both_dataset_and_label_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(record(label="nccl-netwrok-error"))])
    with pytest.raises(DatasetLabelError) as info:
        load_incidents(path, labels=LABELS)
    assert isinstance(info.value, UnknownLabelError) and isinstance(info.value, DatasetError)
    assert "did you mean 'nccl-network-error'" in str(info.value)


def test_unknown_is_always_an_allowed_label(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(record(label="unknown"))])
    assert load_incidents(path, labels=set())[0].label == "unknown"


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(record()), '{"id": "r2", broken'])
    with pytest.raises(DatasetError, match=re.escape(f"{path}:2: bad JSON")):
        load_incidents(path, labels=LABELS)


def test_non_object_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", ['["not", "an", "object"]'])
    with pytest.raises(DatasetError, match=re.escape(f"{path}:1: expected a JSON object, found list")):
        load_incidents(path, labels=LABELS)


def test_duplicate_id_names_both_records(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", [json.dumps(record()), json.dumps(record(log="other"))])
    with pytest.raises(DatasetError) as info:
        load_incidents(path, labels=LABELS)
    message = str(info.value)
    assert f"{path}:2 (id 'r1'): field id: duplicate id, first seen at {path}:1" in message


def test_duplicate_id_across_files(tmp_path: Path) -> None:
    a = write_lines(tmp_path / "a.jsonl", [json.dumps(record())])
    b = write_lines(tmp_path / "b.jsonl", [json.dumps(record())])
    with pytest.raises(DatasetError, match="duplicate id"):
        load_incidents([a, b], labels=LABELS)


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "d.jsonl",
        [json.dumps(record(id="a", log="")), "{oops", json.dumps(record(id="c", label="nope"))],
    )
    with pytest.raises(DatasetError) as info:
        load_incidents(path, labels=LABELS)
    message = str(info.value)
    assert message.startswith("3 invalid incident record(s):")
    assert f"{path}:1 (id 'a'): field log" in message
    assert f"{path}:2: bad JSON" in message
    assert f"{path}:3 (id 'c'): field label" in message
    assert not isinstance(info.value, DatasetLabelError)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or directory"):
        load_incidents(tmp_path / "nope.jsonl", labels=LABELS)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(DatasetError, match="not UTF-8"):
        load_incidents(path, labels=LABELS)


# --------------------------------------------------------------------------- JSONL and datasets round trips


def test_fixture_loads() -> None:
    incidents = load_incidents(FIXTURES / "valid.jsonl", labels=LABELS)
    assert [i.id for i in incidents] == ["oom-1", "oom-2", "shm-1", "unk-1"]
    assert incidents[2].logs == {
        "rank3.log": "NCCL WARN Error while creating shared memory segment",
        "node-a/worker-2.log": "waiting at barrier",
    }
    assert incidents[0].source_group == incidents[1].source_group == "github.com/org/repo/12"


def test_write_jsonl_round_trip_and_is_deterministic(tmp_path: Path) -> None:
    incidents = load_incidents(FIXTURES / "valid.jsonl", labels=LABELS)
    first = write_jsonl(incidents, tmp_path / "out" / "a.jsonl")
    second = write_jsonl(load_incidents(first, labels=LABELS), tmp_path / "b.jsonl")
    assert load_incidents(first, labels=LABELS) == incidents
    assert first.read_bytes() == second.read_bytes()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["a.jsonl"]  # no temporary file left


def test_write_jsonl_rejects_duplicate_ids(tmp_path: Path) -> None:
    inc = Incident(id="a", label="cuda-oom", log="x", source="s")
    with pytest.raises(DatasetError, match="duplicate id 'a'"):
        write_jsonl([inc, inc], tmp_path / "d.jsonl")


def test_load_dataset_json_round_trips_ragged_logs(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    incidents = load_incidents(FIXTURES / "valid.jsonl", labels=LABELS)
    path = write_jsonl(incidents, tmp_path / "d.jsonl")
    ds = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert from_hf_dataset(ds, labels=LABELS) == incidents


def test_load_dataset_json_struct_inferred_logs_lose_null_keys(tmp_path: Path) -> None:
    # When every row has the same keys datasets infers a struct; when rows differ and it
    # still infers one (older versions), absent keys come back as null and must go.
    rows = [{"id": "a", "label": "cuda-oom", "logs": {"0": "x", "1": None}, "source": "s"}]
    assert from_hf_dataset(rows, labels=LABELS)[0].logs == {"0": "x"}
    datasets = pytest.importorskip("datasets")
    same_keys = [Incident(id=f"i{n}", label="cuda-oom", logs={"0": "a", "1": "b"}, source="s") for n in range(2)]
    path = write_jsonl(same_keys, tmp_path / "d.jsonl")
    ds = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert from_hf_dataset(ds, labels=LABELS) == same_keys


def test_to_hf_dataset_round_trip(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    incidents = load_incidents(FIXTURES / "valid.jsonl", labels=LABELS)
    ds = to_hf_dataset(incidents)
    assert isinstance(ds, datasets.Dataset)
    assert ds.column_names == ["id", "label", "log", "logs", "initiating_rank", "source", "meta"]
    assert ds[2]["logs"] == incidents[2].logs  # ragged keys kept, no null-filled union
    assert from_hf_dataset(ds, labels=LABELS) == incidents
    # the Dataset's own JSON export is a valid incident file
    ds.to_json(str(tmp_path / "export.jsonl"))
    assert load_incidents(tmp_path / "export.jsonl", labels=LABELS) == incidents


def test_from_hf_dataset_names_rows() -> None:
    rows = [record(id="a"), record(id="b", log="")]
    with pytest.raises(DatasetError, match=r"row 1 \(id 'b'\): field log: empty log"):
        from_hf_dataset(rows, labels=LABELS)


def test_import_does_not_load_datasets_or_sklearn() -> None:
    code = "import sys, denpex_ml.dataset; print(sorted({'datasets', 'sklearn'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO / "src")}
    )
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- label-folder layout


def test_label_folder_layout() -> None:
    incidents = {i.id: i for i in load_incidents(FIXTURES / "layout", labels=LABELS)}
    assert sorted(incidents) == ["job-1", "job-2", "job-3"]
    job1 = incidents["job-1"]
    assert job1.label == "cuda-oom"
    assert sorted(job1.logs or {}) == ["node-a/worker-2.log", "rank0.log"]  # incident.json is not a log
    assert job1.source == "https://github.com/org/repo/issues/99"
    assert job1.initiating_rank == 0 and job1.meta == {"note": "fixture"}
    job2 = incidents["job-2"]
    assert job2.log == "RuntimeError: CUDA out of memory.\n" and job2.source == "dir:cuda-oom/job-2"
    assert incidents["job-3"].label == "host-oom" and sorted(incidents["job-3"].logs or {}) == ["0", "1"]


def _layout(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "root"
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"cuda-oomm/job/0": b"x"}, "field label: 'cuda-oomm' is not a taxonomy id; did you mean 'cuda-oom'"),
        ({"cuda-oom/job/0": b""}, "field logs['0']: empty log"),
        ({"cuda-oom/job/0": b"x\x00y"}, "binary file"),
        ({"cuda-oom/job/incident.json": b"{}"}, "field logs: incident folder has no log files"),
        ({"cuda-oom/job/0": b"x", "cuda-oom/job/incident.json": b'{"label": "host-oom"}'}, "field label: unexpected"),
        ({"cuda-oom/job/0": b"x", "cuda-oom/job/incident.json": b"{bad"}, "cannot read as JSON"),
        ({"cuda-oom/job/0": b"x", "cuda-oom/job/incident.json": b'{"initiating_rank": -1}'}, "field initiating_rank"),
        ({"stray.txt": b"x"}, "expected a label folder"),
        ({"cuda-oom/job.log": b"x", "host-oom/job/0": b"y"}, "duplicate id"),
    ],
)
def test_label_folder_errors(tmp_path: Path, files: dict[str, bytes], fragment: str) -> None:
    root = _layout(tmp_path, files)
    with pytest.raises(DatasetError) as info:
        load_incidents(root, labels=LABELS)
    assert fragment in str(info.value)
    assert str(root) in str(info.value)


def test_label_folder_skips_hidden_files(tmp_path: Path) -> None:
    root = _layout(tmp_path, {"cuda-oom/job/0": b"x", "cuda-oom/job/.nfs123": b"\x00", ".git/HEAD": b"ref"})
    assert load_incidents(root, labels=LABELS)[0].logs == {"0": "x"}


def test_jsonl_and_folders_load_together() -> None:
    incidents = load_incidents([FIXTURES / "valid.jsonl", FIXTURES / "layout"], labels=LABELS)
    assert len(incidents) == 7


# --------------------------------------------------------------------------- grouped splits


def _assert_partition(n: int, folds: list[tuple[Any, Any]]) -> None:
    tested = sorted(int(i) for _, test in folds for i in test)
    assert tested == list(range(n))
    for train, test in folds:
        assert sorted([*map(int, train), *map(int, test)]) == list(range(n))


@pytest.mark.parametrize("stratify", [True, False])
def test_group_kfold_has_no_leakage(stratify: bool) -> None:
    incidents = make_incidents(n_groups=12, per_group=3)
    folds = group_kfold(incidents, k=4, seed=1, stratify=stratify)
    assert len(folds) == 4
    _assert_partition(len(incidents), folds)
    for train, test in folds:
        train_groups = {incidents[i].source_group for i in train}
        test_groups = {incidents[i].source_group for i in test}
        assert not train_groups & test_groups
        assert len(test) > 0


def test_group_kfold_is_deterministic() -> None:
    incidents = make_incidents(n_groups=10, per_group=2)
    a = group_kfold(incidents, k=5, seed=3)
    b = group_kfold(incidents, k=5, seed=3)
    assert all((x[1] == y[1]).all() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("stratify", [True, False])
def test_train_test_split_grouped_has_no_leakage(stratify: bool) -> None:
    incidents = make_incidents(n_groups=20, per_group=3)
    train, test = train_test_split_grouped(incidents, test_size=0.25, seed=0, stratify=stratify)
    assert len(train) + len(test) == len(incidents) and len(test) > 0
    assert not {incidents[i].source_group for i in train} & {incidents[i].source_group for i in test}


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda inc: group_kfold(inc, k=1), "k: expected an integer >= 2"),
        (lambda inc: group_kfold(inc, k=4), "k: 4 folds need at least 4 source groups, found 3"),
        (lambda inc: train_test_split_grouped(inc, test_size=0.0), "test_size"),
        (lambda inc: train_test_split_grouped(inc[:2], test_size=0.2), "at least 2 source groups, found 1"),
    ],
)
def test_split_argument_errors(call: Callable[[list[Incident]], object], fragment: str) -> None:
    with pytest.raises(DatasetError, match=re.escape(fragment)):
        call(make_incidents(n_groups=3, per_group=2))


def test_check_grouped_split_detects_leakage() -> None:
    incidents = make_incidents(n_groups=2, per_group=2)  # ids g0-0, g0-1 share a thread
    with pytest.raises(DatasetError, match="source group"):
        check_grouped_split(incidents, [0, 2, 3], [1])
    with pytest.raises(DatasetError, match="both train and test"):
        check_grouped_split(incidents, [0, 1], [1])
    check_grouped_split(incidents, [0, 1], [2, 3])


def test_a_new_batch_from_a_thread_already_held_is_refused() -> None:
    """GitHub numbers issues and pull requests in one sequence: ``issues/2408`` and ``pull/2408``
    are one thread (two records of batch dq were held under the other address)."""
    held = [Incident(id="i-2408", label="cuda-oom", log="x", source="https://github.com/Org/Repo/issues/2408")]
    again = Incident(id="dq-2408", label="cuda-oom", log="x", source="https://github.com/org/repo/pull/2408#top")
    other = Incident(id="dq-2409", label="cuda-oom", log="x", source="https://github.com/org/repo/pull/2409")
    with pytest.raises(
        DatasetError, match=r"1 incident\(s\) from threads already held: 'dq-2408' \(held as 'i-2408'\)"
    ):
        check_new_threads([other, again], held)
    check_new_threads([other], held)


def test_a_new_log_that_another_thread_holds_word_for_word_is_refused() -> None:
    """A user cross-posting one paste to a dependency's tracker (ds's ClipBERT log was apex's)."""
    paste = "\n".join(f'  File "train.py", line {n}, in step' for n in range(5)) + "\nRuntimeError: boom"
    held = [Incident(id="apex-1", label="cuda-oom", log=paste, source="https://github.com/nv/apex/issues/1")]

    def new(rid: str, log: str) -> Incident:
        return Incident(id=rid, label="cuda-oom", log=log, source=f"https://github.com/org/clip/issues/{rid}")

    spaced = "\n\n".join("   ".join(line.split(" ")) for line in paste.splitlines())  # other whitespace, blank lines
    with pytest.raises(
        DatasetError,
        match=r"1 incident\(s\) whose log another thread holds word for word: '40' \(the log of 'apex-1'\)",
    ):
        check_new_threads([new("40", spaced)], held)
    check_new_threads([new("41", paste.replace("boom", "bang"))], held)  # one line differs: another log
    short = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    check_new_threads(
        [new("42", short)], [Incident(id="a", label="cuda-oom", log=short, source="https://github.com/a/b/issues/1")]
    )  # one error line repeats across incidents; it is no paste
    both = Incident(id="dq-1", label="cuda-oom", log=paste, source="https://github.com/nv/apex/pull/1")
    with pytest.raises(DatasetError, match=r"^1 incident\(s\) from threads already held: 'dq-1'[^;]*$"):
        check_new_threads([both], held)  # the thread is the reason; the log is not reported twice
    assert paste_key(Incident(id="m", label="cuda-oom", logs={"0": paste}, source="x:y")) == paste_key(held[0])


#: Cross-posts already held when the guard came (each pair scored and trained on as two threads);
#: the guard keeps any more from joining as unseen.
HELD_CROSS_POSTS = {
    frozenset({"gh-facebookresearch-detectron2-4730", "gh-NVIDIA-nccl-766"}),
    frozenset({"gh-NVIDIA-apex-482", "gh-mit-han-lab-spvnas-10"}),
    frozenset({"gh-TheLastBen-fast-stable-diffusion-193", "gh-facebookresearch-ov-seg-14"}),
    frozenset({"gh-pytorch-pytorch-119072", "gh-pytorch-pytorch-119932"}),
    frozenset({"gh-NVIDIA-apex-1261", "gh-jayleicn-ClipBERT-40"}),
    frozenset({"gh-pytorch-torchtitan-1814", "gh-pytorch-torchtitan-1461"}),
    frozenset({"gh-pytorch-xla-2939", "gh-Lightning-AI-pytorch-lightning-7471"}),
}


def test_no_held_log_is_a_paste_of_another_thread_beyond_the_known_cross_posts() -> None:
    by_key: dict[str, list[str]] = {}
    for path in sorted((REPO / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                key = paste_key(
                    Incident(id=record["id"], label="x", log=record.get("log"), logs=record.get("logs"), source="x:y")
                )
                if key is not None:
                    by_key.setdefault(key, []).append(record["id"])
    assert len(by_key) > 5000
    assert {frozenset(ids) for ids in by_key.values() if len(ids) > 1} == HELD_CROSS_POSTS


def test_cross_posted_threads_share_one_group_in_every_split() -> None:
    """A paste posted to two trackers (and the chain a third post makes) is one split group."""
    paste = "\n".join(f"[rank{n}]: RuntimeError: NCCL error in step {n}" for n in range(6))

    def inc(rid: str, source: str, log: str = paste) -> Incident:
        return Incident(id=rid, label="nccl-network-error", log=log, source=source)

    other = paste.replace("step 5", "step 9")
    incidents = [
        inc("b", "https://github.com/b/b/issues/2"),
        inc("a", "https://github.com/a/a/issues/1"),
        inc("c", "https://github.com/c/c/issues/3", other),
        inc("c2", "https://github.com/c/c/issues/3", paste),  # thread c also holds the paste: joins a and b
        inc("d", "https://github.com/d/d/issues/4", "RuntimeError: one line\n"),
        inc("e", "https://github.com/e/e/issues/5", "RuntimeError: one line\n"),  # too short to be a paste
    ] + [inc(f"x{n}", f"https://github.com/x/x/issues/{n}", f"{paste}\nline {n}") for n in range(8)]
    groups = source_groups(incidents)
    assert groups[:4] == ["github.com/a/a/1"] * 4
    assert groups[4:6] == ["github.com/d/d/4", "github.com/e/e/5"]
    assert len(set(groups)) == 11
    for seed in range(3):
        for _train, test in group_kfold(incidents, k=3, seed=seed, stratify=False):
            assert {int(i) for i in test} >= {0, 1, 2, 3} or not {int(i) for i in test} & {0, 1, 2, 3}
    with pytest.raises(DatasetError, match="source group"):
        check_grouped_split(incidents, [0], [1])  # two threads, one paste


def test_training_and_evaluation_examples_join_the_held_cross_posts() -> None:
    from denpex_ml.training.data import examples_from_incidents

    examples = examples_from_incidents(
        load_incidents(sorted(str(p) for p in (REPO / "data" / "real").glob("*.jsonl"))), "real"
    )
    group = {e.id: e.group for e in examples}
    for pair in HELD_CROSS_POSTS:
        assert len({group[i] for i in pair}) == 1, sorted(pair)
    assert len(set(group.values())) < len({e.id for e in examples})


def test_every_held_thread_sits_in_one_batch() -> None:
    """Each batch of real logs was scored as unseen: none may repeat a thread of another."""
    where: dict[str, str] = {}
    repeated = []
    for path in sorted((REPO / "data" / "real").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                group = source_group(json.loads(line)["source"])
                if where.setdefault(group, path.name) != path.name:
                    repeated.append((group, where[group], path.name))
    assert len(where) > 9000
    assert repeated == []


# --------------------------------------------------------------------------- the real logs


def test_real_logs_load_and_labels_are_in_the_contract() -> None:
    ids = contract_ids()
    assert "cuda-oom" in ids and "unknown" in ids and len(ids) > 30
    incidents = load_incidents(REAL_LOGS, labels=ids)
    assert len(incidents) == 124
    assert {i.label for i in incidents} <= ids
    for inc in incidents:
        assert inc.log and inc.source.startswith("https://github.com/")
        assert inc.meta["label_confidence"] in {"confirmed", "likely", "unconfirmed"}
        assert set(inc.meta) == {
            "title",
            "label_confidence",
            "evidence",
            "framework",
            "rank_format",
            "n_ranks_visible",
            "complete",
        }


def test_real_logs_load_against_the_bundled_taxonomy() -> None:
    # labels=None validates against load_taxonomy(), the contract in code
    incidents = load_incidents(REAL_LOGS)
    assert len(incidents) == 124


def test_real_logs_grouped_folds_keep_threads_together() -> None:
    incidents = load_incidents(REAL_LOGS, labels=contract_ids())
    groups = [i.source_group for i in incidents]
    assert len(set(groups)) < len(groups)  # some threads hold several logs
    for train, test in group_kfold(incidents, k=5, seed=0):
        check_grouped_split(incidents, train, test)


def _import_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_real_logs", REPO / "training" / "import_real_logs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_script_reproduces_the_committed_file(tmp_path: Path) -> None:
    if not SHARED_REAL_LOGS.is_file():
        pytest.skip(f"{SHARED_REAL_LOGS} not present")
    script = _import_script()
    out = tmp_path / "real.jsonl"
    assert script.main(["--src", str(SHARED_REAL_LOGS), "--out", str(out), "--label-ids", str(CONTRACT)]) == 0
    assert out.read_bytes() == REAL_LOGS.read_bytes()


def test_import_script_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _import_script()
    src = write_lines(tmp_path / "src.jsonl", [json.dumps({"id": "x", "label": "cuda-oom"})])
    labels = write_lines(tmp_path / "ids.md", ["- cuda-oom: CUDA out of memory"])
    rc = script.main(["--src", str(src), "--out", str(tmp_path / "o.jsonl"), "--label-ids", str(labels)])
    assert rc == 1
    assert f"{src}:1: field complete: missing" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_label_suggestion_names_each_candidate_once() -> None:
    from denpex_ml.dataset.incident import _check_label

    msg = _check_label("unknwn", ["cuda-oom", "unknown"])
    assert msg is not None and msg.count("'unknown'") == 1
