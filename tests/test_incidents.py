"""The labelled-incident store (denpex_ml.incidents) and its CLI (denpex_ml.cli.incidents)."""

from __future__ import annotations

import io
import json
import multiprocessing
import re
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_INPUT_ERROR, EXIT_OK, EXIT_USAGE
from denpex_ml.dataset import load_incidents, to_hf_dataset
from denpex_ml.errors import (
    DatasetLabelError,
    DenpexError,
    DuplicateIncidentError,
    InputTooLargeError,
    InvalidInputError,
    NotALogError,
    UnknownIncidentError,
    UnknownLabelError,
    UnsafeArchiveMemberError,
)
from denpex_ml.incidents import IncidentStore, content_sha256
from denpex_ml.taxonomy import bundled_taxonomy_dir

IP = "10.1.2.3"
EMAIL = "alice.smith@example.com"
TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWx12"
HOST = "gpu-prod-17"
PLANTED = (IP, EMAIL, TOKEN, HOST)

SECRET_LOG = (
    f"[{HOST}:3] NCCL WARN NET/Socket : Connect to {IP}<43210> failed : Connection refused\n"
    f"job submitted by {EMAIL} with HF_TOKEN {TOKEN}\n"
    "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n"
)
WORKER_LOG = f"{HOST}: [rank5]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE)\n"
OOM_LOG = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
ID_RE = re.compile(r"inc-\d{8}-[0-9a-f]{8}")


def _job_dir(root: Path) -> Path:
    job = root / "job"
    (job / "node-a").mkdir(parents=True)
    (job / "rank0.log").write_text(SECRET_LOG)
    (job / "node-a" / "worker-2.log").write_text(WORKER_LOG)
    return job


def _tar_gz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


# -- add: every kind of source -------------------------------------------------------------
def test_add_single_file_is_a_log_in_the_dataset_format(tmp_path: Path) -> None:
    log = tmp_path / "train-job-17.log"
    log.write_text(OOM_LOG)
    store = IncidentStore(tmp_path / "store")
    assert len(store) == 0 and not store.path.exists()  # created by the first add

    inc = store.add(log, label="cuda-oom", initiating_rank=0)

    assert ID_RE.fullmatch(inc.id) and inc.id.endswith(content_sha256(inc)[:8])
    assert inc.log == OOM_LOG and inc.logs is None
    assert inc.source == "local:train-job-17.log"
    assert inc.meta["origin"] == "user"
    assert inc.meta["content_sha256"] == content_sha256(inc)
    assert inc.meta["label_history"] == [{"label": "cuda-oom", "at": inc.meta["added"]}]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", inc.meta["added"])
    loaded = load_incidents(store.path / "incidents.jsonl")
    assert loaded == [inc] and list(store) == [inc] and store.get(inc.id) == inc
    ds = to_hf_dataset(loaded)
    assert ds[0]["id"] == inc.id and ds[0]["log"] == OOM_LOG and ds[0]["initiating_rank"] == 0


def test_add_directory_keys_relative_paths_and_skips_hidden_and_empty(tmp_path: Path) -> None:
    job = _job_dir(tmp_path)
    (job / ".DS_Store").write_bytes(b"\x00\x01junk")
    (job / "rank1.err").write_text("  \n")
    store = IncidentStore(tmp_path / "store")

    inc = store.add(job, label="nccl-network-error", source_url="https://github.com/org/repo/issues/12")

    assert inc.log is None and inc.logs is not None
    assert sorted(inc.logs) == ["node-a/worker-2.log", "rank0.log"]
    assert inc.meta["skipped"] == ["rank1.err (empty)"]
    assert inc.source == "https://github.com/org/repo/issues/12" and inc.source_group == "github.com/org/repo/12"
    assert load_incidents(store.file) == [inc]


def test_add_tar_gz_and_zip_strip_the_archive_and_its_top_folder(tmp_path: Path) -> None:
    members = {"job/rank0.log": OOM_LOG.encode(), "job/node-b/worker-1.log": b"[rank1]: step 3 loss 1.25\n"}
    archive = _tar_gz(tmp_path / "job-17.tar.gz", members)
    store = IncidentStore(tmp_path / "store")
    inc = store.add(archive, label="cuda-oom")
    assert inc.logs == {"rank0.log": OOM_LOG, "node-b/worker-1.log": "[rank1]: step 3 loss 1.25\n"}
    assert inc.source == "local:job-17.tar.gz"

    zpath = tmp_path / "other.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("rank0.log", "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
        zf.writestr("core.1234", b"\x7fELF\x00\x00\x00binary")
    inc2 = store.add(zpath, label="cuda-illegal-memory-access")
    assert list(inc2.logs or {}) == ["rank0.log"] and inc2.meta["skipped"] == ["core.1234 (binary)"]
    assert [i.id for i in load_incidents(store.file)] == [inc.id, inc2.id]


def test_add_mapping(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    inc = store.add({0: OOM_LOG, "node-a/worker-2.log": "[rank1]: waiting\n"}, label="cuda-oom", meta={"title": "t"})
    assert inc.logs == {"0": OOM_LOG, "node-a/worker-2.log": "[rank1]: waiting\n"}
    assert inc.source == f"local:{inc.id}" and inc.meta["title"] == "t"
    with pytest.raises(DenpexError, match="must be a rank"):
        store.add({1.5: "x"}, label="cuda-oom")  # type: ignore[dict-item]
    with pytest.raises(DenpexError, match=r"'\.\.' path component"):
        store.add({"../etc/passwd": "x"}, label="cuda-oom")
    with pytest.raises(InvalidInputError, match="set by the incident store"):
        store.add({"0": "other text"}, label="cuda-oom", meta={"origin": "me"})
    with pytest.raises(InvalidInputError, match="log path or a mapping"):
        store.add(42, label="cuda-oom")  # type: ignore[arg-type]


# -- masking -------------------------------------------------------------------------------
def test_every_file_is_masked_with_one_masker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = _job_dir(tmp_path)
    store = IncidentStore(tmp_path / "store")
    inc = store.add(job, label="nccl-network-error")

    stored = (store.path / "incidents.jsonl").read_text()
    for planted in PLANTED:
        assert planted not in stored
    logs = inc.logs or {}
    assert "<masked:email>" in logs["rank0.log"] and "<masked:token>" in logs["rank0.log"]
    assert "Connect to ip-1<43210>" in logs["rank0.log"]
    # the host of rank0.log's [host:rank] prefix and of worker-2.log's "host: " prefix is one pseudonym
    pseudonym = re.match(r"\[([\w-]+):3\]", logs["rank0.log"])
    assert pseudonym is not None and pseudonym.group(1).startswith("node-")
    assert logs["node-a/worker-2.log"].startswith(f"{pseudonym.group(1)}: [rank5]")

    assert main(["incidents", "--store", str(store.path), "list", "--json"]) == EXIT_OK
    out = capsys.readouterr().out
    assert main(["incidents", "--store", str(store.path), "show", inc.id]) == EXIT_OK
    shown = capsys.readouterr().out
    assert json.loads(out)[0]["id"] == inc.id
    assert json.loads(shown) == inc.to_dict()
    for planted in PLANTED:
        assert planted not in out and planted not in shown


def test_secrets_in_source_url_and_host_in_file_name_are_masked(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    inc = store.add({"0": OOM_LOG}, label="cuda-oom", source_url=f"https://tickets.example.org/1?by={EMAIL}")
    assert EMAIL not in inc.source and inc.source.startswith("https://tickets.example.org/1")
    log = tmp_path / f"{IP}.log"
    log.write_text(f"failure on {IP}\n")
    inc2 = store.add(log, label="unknown")
    assert inc2.source == "local:ip-1.log" and inc2.log == "failure on ip-1\n"


def test_source_locations_and_ranks_in_brackets_are_not_taken_for_hosts(tmp_path: Path) -> None:
    text = "[train_2.py:10] loss is nan at step 7\n[rank3:0] ProcessGroupNCCL.cpp:1970 abort\n"
    inc = IncidentStore(tmp_path / "store").add({"0": text}, label="loss-nan-divergence")
    assert (inc.logs or {})["0"] == text


# -- refusals ------------------------------------------------------------------------------
def test_unknown_label_suggests_the_closest_id(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    with pytest.raises(DatasetLabelError, match="did you mean 'nccl-network-error'") as err:
        store.add({"0": OOM_LOG}, label="nccl-netwrok-error")
    assert isinstance(err.value, UnknownLabelError)
    assert not store.path.exists()


def test_labels_of_an_extra_taxonomy_dir(tmp_path: Path) -> None:
    user = tmp_path / "tax"
    user.mkdir()
    raw = yaml.safe_load((bundled_taxonomy_dir() / "cuda-oom.yaml").read_text())
    raw["id"] = "licence-server-down"
    (user / "licence-server-down.yaml").write_text(yaml.safe_dump(raw))
    store = IncidentStore(tmp_path / "store", taxonomy_dirs=[user])
    inc = store.add({"0": "FlexLM: licence server unreachable\n"}, label="licence-server-down")
    assert store.labels() == {"licence-server-down": 1}
    assert load_incidents(store.file, labels=store.allowed_labels) == [inc]
    with pytest.raises(DatasetLabelError):
        IncidentStore(tmp_path / "store").relabel(inc.id, "licence-server-down")


@pytest.mark.parametrize("content", [b"", b"  \n\t\n"])
def test_empty_log_is_refused(tmp_path: Path, content: bytes) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(content)
    store = IncidentStore(tmp_path / "store")
    with pytest.raises(NotALogError, match="empty"):
        store.add(log, label="cuda-oom")
    with pytest.raises(NotALogError, match="empty"):
        store.add({"0": content.decode()}, label="cuda-oom")
    assert len(store) == 0


def test_binary_file_is_refused(tmp_path: Path) -> None:
    core = tmp_path / "core.1234"
    core.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    store = IncidentStore(tmp_path / "store")
    with pytest.raises(NotALogError, match="binary"):
        store.add(core, label="segfault-native-crash")
    with pytest.raises(NotALogError, match="binary"):
        store.add({"0": b"text\x00with NUL"}, label="segfault-native-crash")
    only_binary = tmp_path / "bin"
    only_binary.mkdir()
    (only_binary / "core").write_bytes(b"\x00" * 64)
    with pytest.raises(NotALogError, match="no text log"):
        store.add(only_binary, label="segfault-native-crash")


def test_duplicate_content_and_id_collision(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(OOM_LOG)
    store = IncidentStore(tmp_path / "store")
    first = store.add(log, label="cuda-oom", incident_id="job-1")
    with pytest.raises(DuplicateIncidentError, match="already stored as incident 'job-1'") as err:
        store.add(log, label="host-oom")
    assert err.value.existing_id == "job-1"
    copy = tmp_path / "copy-of-a.log"
    copy.write_text(OOM_LOG)
    with pytest.raises(DuplicateIncidentError, match="'job-1'"):
        store.add(copy, label="cuda-oom")
    with pytest.raises(DuplicateIncidentError, match="id 'job-1' is already taken"):
        store.add({"0": "another failure\n"}, label="cuda-oom", incident_id="job-1")
    assert list(store) == [first]


def test_masked_text_above_the_cap_is_refused(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store", max_bytes=1000)
    with pytest.raises(InputTooLargeError, match="max_bytes=1000"):
        store.add({"0": "x" * 600, "1": "y" * 600}, label="cuda-oom")
    big = tmp_path / "big.log"
    big.write_text("z" * 5000)  # above 4 * max_bytes: refused while reading
    with pytest.raises(InputTooLargeError):
        store.add(big, label="cuda-oom")
    with pytest.raises(InvalidInputError):
        IncidentStore(tmp_path / "s2", max_bytes=0)


def test_unsafe_archive_member_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("job/link.log")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(UnsafeArchiveMemberError, match="link"):
        IncidentStore(tmp_path / "store").add(archive, label="cuda-oom")


# -- relabel, remove, fingerprint ----------------------------------------------------------
def test_relabel_is_reflected_in_load_incidents_and_fingerprint(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    a = store.add({"0": OOM_LOG}, label="cuda-oom")
    b = store.add({"0": SECRET_LOG}, label="unknown")
    fp0 = store.fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", fp0) and store.labels() == {"cuda-oom": 1, "unknown": 1}

    new = store.relabel(b.id, "nccl-network-error")

    assert new.label == "nccl-network-error"
    assert [h["label"] for h in new.meta["label_history"]] == ["unknown", "nccl-network-error"]
    assert {i.id: i.label for i in load_incidents(store.file)} == {a.id: "cuda-oom", b.id: "nccl-network-error"}
    fp1 = store.fingerprint()
    assert fp1 != fp0
    assert IncidentStore(store.path).fingerprint() == fp1  # a fresh reader sees the same
    assert store.relabel(b.id, "nccl-network-error") == new and store.fingerprint() == fp1  # no-op
    with pytest.raises(DatasetLabelError, match="did you mean 'host-oom'"):
        store.relabel(b.id, "host-ooom")
    store.relabel(b.id, "unknown")
    assert store.fingerprint() == fp0  # metadata (history, times) does not count


def test_remove_get_and_unknown_ids(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    with pytest.raises(UnknownIncidentError, match="empty"):
        store.get("nope")
    a = store.add({"0": OOM_LOG}, label="cuda-oom", incident_id="job-17")
    b = store.add({"0": SECRET_LOG}, label="nccl-network-error", incident_id="job-18")
    fp = store.fingerprint()

    assert store.remove("job-17") == a

    assert list(store) == [b] and load_incidents(store.file) == [b] and "job-17" not in store
    assert store.fingerprint() != fp
    with pytest.raises(UnknownIncidentError, match="did you mean 'job-18'") as err:
        store.get("job-17")
    assert isinstance(err.value, KeyError)
    with pytest.raises(UnknownIncidentError):
        store.remove("job-17")
    with pytest.raises(UnknownIncidentError):
        store.relabel("job-71", "cuda-oom")


def test_export_is_a_dataset_file(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path / "store")
    inc = store.add({"0": OOM_LOG}, label="cuda-oom")
    out = store.export(tmp_path / "out" / "all.jsonl")
    assert load_incidents(out) == [inc]


# -- concurrency ---------------------------------------------------------------------------
def _add_many(store_dir: str, worker: int, n: int, start: multiprocessing.synchronize.Event) -> None:
    store = IncidentStore(store_dir)
    start.wait(10)
    for k in range(n):
        store.add({"0": f"[rank{worker}]: worker {worker} failure {k}\n"}, label="cuda-oom")


def test_concurrent_adds_from_two_processes_all_land(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    store_dir = str(tmp_path / "store")
    procs = [ctx.Process(target=_add_many, args=(store_dir, w, 8, start)) for w in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    loaded = load_incidents(Path(store_dir) / "incidents.jsonl")
    assert len(loaded) == 16 and len({i.id for i in loaded}) == 16
    assert not [p for p in Path(store_dir).iterdir() if p.name.endswith(".tmp")]


# -- CLI (the command as registered by denpex_ml.cli: no test-side registration) ------------
def test_cli_add_list_relabel_show_export_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store_dir = tmp_path / "store"
    monkeypatch.setenv("DENPEX_INCIDENTS", str(store_dir))
    job = _job_dir(tmp_path)
    src = "https://github.com/org/repo/issues/7"

    assert main(["incidents", "add", str(job), "--label", "unknown", "--initiating-rank", "3", "--source", src]) == 0
    out = capsys.readouterr().out
    inc_id = ID_RE.search(out)
    assert inc_id is not None and "2 file(s)" in out
    iid = inc_id.group(0)

    assert main(["incidents", "list"]) == EXIT_OK
    table = capsys.readouterr().out
    assert iid in table and "unknown" in table and "github.com/org/repo/issues/7" in table
    assert main(["incidents", "list", "--json"]) == EXIT_OK
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["id"] == iid and rows[0]["files"] == 2 and rows[0]["initiating_rank"] == 3
    assert rows[0]["bytes"] > 0 and rows[0]["source"] == src

    assert main(["incidents", "relabel", iid, "nccl-network-error"]) == EXIT_OK
    assert "unknown -> nccl-network-error" in capsys.readouterr().out
    assert main(["incidents", "show", iid]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert shown["label"] == "nccl-network-error" and shown["initiating_rank"] == 3

    out_file = tmp_path / "export.jsonl"
    assert main(["incidents", "export", str(out_file)]) == EXIT_OK
    assert "wrote 1 incident(s)" in capsys.readouterr().out
    assert [i.label for i in load_incidents(out_file)] == ["nccl-network-error"]

    assert main(["incidents", "remove", iid]) == EXIT_OK
    assert f"removed {iid}" in capsys.readouterr().out
    assert main(["incidents", "list", "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []


def test_cli_errors_and_store_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "a.log"
    log.write_text(OOM_LOG)
    store = str(tmp_path / "s")
    assert main(["incidents", "add", str(log), "--label", "cuda-oomm", "--store", store]) == EXIT_INPUT_ERROR
    err = capsys.readouterr().err
    assert "did you mean 'cuda-oom'" in err and "Traceback" not in err
    assert main(["incidents", "--store", store, "add", str(log), "--label", "cuda-oom", "--id", "j1"]) == EXIT_OK
    assert main(["incidents", "--store", store, "add", str(log), "--label", "cuda-oom"]) == EXIT_INPUT_ERROR
    assert "already stored as incident 'j1'" in capsys.readouterr().err
    assert main(["incidents", "--store", store, "show", "j2"]) == EXIT_INPUT_ERROR
    assert "did you mean 'j1'" in capsys.readouterr().err
    assert main(["incidents", "--store", store, "add", str(log), "--label", "x", "--initiating-rank", "-1"]) == 2
    assert main(["incidents", "--store", store]) == EXIT_USAGE  # no action
    assert main(["incidents", "--store", store, "add", str(log)]) == EXIT_USAGE  # no --label
    assert len(IncidentStore(store)) == 1
