"""Issue #14's done-when cases: the node and GPU of a hardware failure, from the logs alone and
from a host's kernel log; the most blamed node first across an archive; real names only when
the owner asks."""

from __future__ import annotations

import csv
import json
import stat
from pathlib import Path

import pytest

from denpex_ml.batch import score_archive
from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_OK
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.topology import NodeSummary

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "topology"


@pytest.fixture(scope="module")
def model() -> DenpexModel:
    return load_model()


def _watchdog_job(root: Path, *, kernel: bool = True, silent: int = 10) -> Path:
    """16 ranks on two hosts (rank 10: gpu-b22 GPU 2, bus 86:00), one rank silent and 15 watchdog
    timeouts; gpu-b22's dmesg has Xid 79 on bus 86:00."""
    root.mkdir(parents=True)
    bus = ["18", "3b", "86", "af", "c1", "d2", "e3", "f4"]
    lines = []
    for r in range(16):
        host, lr = ("gpu-a17" if r < 8 else "gpu-b22"), r % 8
        lines.append(
            f"{host}: [rank{r}]: {host}:{5000 + r}:{5000 + r} [{lr}] NCCL INFO comm 0x7e{r:02d} rank {r} "
            f"nranks 16 cudaDev {lr} busId {bus[lr]}000 - Init COMPLETE"
        )
    for r in range(16):
        if r == silent:
            continue
        host = "gpu-a17" if r < 8 else "gpu-b22"
        lines.append(
            f"{host}: [rank{r}]: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=311, "
            "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600042 milliseconds before timing out."
        )
    (root / "train.log").write_text("\n".join(lines) + "\n")
    if kernel:
        (root / "gpu-b22").mkdir()
        (root / "gpu-b22" / "dmesg.txt").write_text((FIX / "dmesg_xid79.txt").read_text())
    return root


def test_ecc_example_names_node_and_gpu(model: DenpexModel, capsys: pytest.CaptureFixture[str]) -> None:
    d = model.classify(FIX / "deepspeed_ecc.log")
    assert d.label == "gpu-xid-ecc-error" and d.initiating_rank == 6
    s = d.suspects[0]
    assert s.host is not None and s.host.startswith("node-") and s.gpu == 2 and s.ranks == (6,)
    text = d.summary()
    assert f"{s.host} GPU 2" in text and f"NodeName={s.host} State=DRAIN" in text and "nvidia-smi -r -i 2" in text
    assert "gpu-b22" not in text + json.dumps(d.to_dict()) and "host_names" not in d.to_dict()
    # the owner asks: the real name beside the pseudonym
    shown = model.classify(FIX / "deepspeed_ecc.log", reveal_hosts=True)
    assert shown.to_dict()["suspects"][0]["host_name"] == "gpu-b22"
    assert f"{s.host} (gpu-b22) GPU 2" in shown.summary() and "NodeName=gpu-b22 State=DRAIN" in shown.summary()
    assert main(["classify", str(FIX / "deepspeed_ecc.log")]) == EXIT_OK
    assert "gpu-b22" not in capsys.readouterr().out
    assert main(["classify", str(FIX / "deepspeed_ecc.log"), "--reveal-hosts"]) == EXIT_OK
    assert "gpu-b22" in capsys.readouterr().out


def test_host_map_file_is_private(model: DenpexModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hosts.json"
    assert main(["classify", str(FIX / "deepspeed_ecc.log"), "--json", "--host-map", str(out)]) == EXIT_OK
    printed = capsys.readouterr().out
    assert "gpu-b22" not in printed  # the map file is asked for, the output stays masked
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert set(json.loads(out.read_text()).values()) == {"gpu-a17", "gpu-b22"}


def test_kernel_xid_and_watchdog_timeouts_blame_the_gpu(model: DenpexModel, tmp_path: Path) -> None:
    job = _watchdog_job(tmp_path / "job")
    d = model.classify(job, reveal_hosts=True)
    top = d.suspects[0]
    assert top.basis.startswith("kernel") and top.xid == 79 and top.entry == "gpu-fallen-off-bus"
    assert (d.host_names or {})[top.host or ""] == "gpu-b22"
    assert (top.gpu, top.bus_id, top.ranks) == (2, "0000:86:00", (10,))
    assert "Xid 79" in d.summary() and "gpu-b22" not in model.classify(job).summary()
    # without the kernel log, a watchdog hang names no node
    assert not [s for s in model.classify(_watchdog_job(tmp_path / "plain", kernel=False)).suspects if s.xid]


def _archive(root: Path) -> Path:
    root.mkdir()
    for i in range(3):  # three jobs blame gpu-b22 (Xid 79 in its kernel log)
        _watchdog_job(root / f"job-{i}")
    one = root / "job-a17"  # one job blames gpu-a17 GPU 0 (Xid 79 there)
    _watchdog_job(one, kernel=False, silent=0)
    (one / "gpu-a17").mkdir()
    (one / "gpu-a17" / "dmesg.txt").write_text((FIX / "dmesg_xid79.txt").read_text().replace("86:00", "18:00"))
    (root / "job-ok.log").write_text("[rank0]: step 1\n[rank0]: training finished\n")
    return root


def test_archive_lists_the_repeatedly_blamed_node_first(model: DenpexModel, tmp_path: Path) -> None:
    nodes = NodeSummary()
    rows = list(score_archive(_archive(tmp_path / "jobs"), model=model, nodes=nodes))
    assert len(rows) == 5
    blamed = [r for r in rows if r.suspects]
    assert len(blamed) == 4 and all("host_names" not in r.to_dict() for r in rows)
    table = nodes.rows(reveal=True)
    first = table[0]
    assert (first["host_name"], first["level"], first["jobs"], first["confirmed_jobs"]) == ("gpu-b22", "node", 3, 3)
    assert table[1]["level"] == "gpu" and table[1]["gpu"] == 2
    assert sorted(first["job_ids"].split(";")) == ["job-0", "job-1", "job-2"]
    assert "gpu-b22" not in json.dumps(nodes.rows()) + json.dumps([r.to_dict() for r in rows])


def test_score_cli_writes_nodes_and_only_reveals_when_asked(
    model: DenpexModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = _archive(tmp_path / "jobs")
    out, nodes_csv = tmp_path / "out.jsonl", tmp_path / "nodes.csv"
    assert main(["score", str(jobs), "-o", str(out), "--nodes", str(nodes_csv), "--quiet"]) == EXIT_OK
    with nodes_csv.open() as fh:
        table = list(csv.DictReader(fh))
    assert table[0]["level"] == "node" and table[0]["jobs"] == "3" and "host_name" not in table[0]
    assert "gpu-b22" not in nodes_csv.read_text() + out.read_text()
    assert not list(tmp_path.glob("*.hosts.json"))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {s["host"] for r in rows for s in r["suspects"]} == {table[0]["host"], table[2]["host"]}
    # the owner asks
    assert (
        main(
            ["score", str(jobs), "-o", str(out), "--overwrite", "--nodes", str(nodes_csv), "--reveal-hosts", "--quiet"]
        )
        == EXIT_OK
    )
    capsys.readouterr()
    host_map = tmp_path / "nodes.csv.hosts.json"
    assert stat.S_IMODE(host_map.stat().st_mode) == 0o600 and stat.S_IMODE(nodes_csv.stat().st_mode) == 0o600
    with nodes_csv.open() as fh:
        first = next(csv.DictReader(fh))
    assert first["host_name"] == "gpu-b22" and json.loads(host_map.read_text())["hosts"][first["host"]] == "gpu-b22"
    assert "gpu-b22" not in out.read_text()  # results rows stay masked
