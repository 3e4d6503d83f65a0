"""Rank -> host / GPU from each source a log carries (fixtures in tests/fixtures/topology)."""

from __future__ import annotations

from pathlib import Path

import pytest

from denpex_ml.logs import read_logs
from denpex_ml.logs.masking import Masker
from denpex_ml.topology import normalise_bus_id, parse_topology

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "topology"
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3b000", "0000:3b:00"), ("00000000:3B:00.0", "0000:3b:00"), ("PCI:0000:86:00", "0000:86:00"),
     ("1c:00.0", "0000:1c:00"), ("10086000", "0100:86:00"), ("zz", None), ("3b:ff", None)],
)  # fmt: skip
def test_bus_ids_of_every_spelling(text: str, expected: str | None) -> None:
    assert normalise_bus_id(text) == expected


def test_pdsh_prefix_and_nccl_comm_lines() -> None:
    masker = Masker()
    topo = parse_topology(read_logs(FIX / "deepspeed_ecc.log", masker=masker))
    real = masker.reveal_map()
    p = topo.place(6)
    assert p is not None and real[p.host or ""] == "gpu-b22"
    assert (p.gpu, p.bus_id) == (2, "0000:86:00")
    assert topo.world_size == 8 and len(topo.hosts) == 2
    assert topo.ranks_on(p.host, bus_id="0000:86:00") == [6]


def test_nccl_debug_prefix_without_rank_prefix() -> None:
    masker = Masker()
    topo = parse_topology(read_logs(FIX / "nccl_comm.log", masker=masker))
    real = masker.reveal_map()
    assert {r: (real[p.host or ""], p.gpu, p.bus_id) for r, p in topo.ranks.items()} == {
        0: ("trn-07", 0, "0000:af:00"),
        1: ("trn-07", 1, "0000:d8:00"),
        2: ("trn-08", 0, "0000:af:00"),
        3: ("trn-08", 1, "0000:d8:00"),
    }


def test_cuda_visible_devices_slurm_env_and_srun_error() -> None:
    masker = Masker()
    topo = parse_topology(read_logs(FIX / "cvd_srun.log", masker=masker))
    real = masker.reveal_map()
    gpu = {r: p.gpu for r, p in topo.ranks.items()}
    assert gpu[0] == 4 and gpu[1] == 5 and gpu[2] == 7  # CUDA_VISIBLE_DEVICES[cudaDev or local rank]
    assert real[topo.ranks[0].host or ""] == "dgx-03" and real[topo.ranks[3].host or ""] == "dgx-04"
    assert "CUDA_VISIBLE_DEVICES" in topo.ranks[1].basis


def test_ray_train_worker_table() -> None:
    masker = Masker()
    topo = parse_topology(read_logs(FIX / "ray_train.log", masker=masker))
    real = masker.reveal_map()
    assert [real[topo.ranks[r].host or ""] for r in range(4)] == ["10.1.0.11", "10.1.0.11", "10.1.0.12", "10.1.0.12"]
    assert topo.ranks[3].local_rank == 1


def test_torchelastic_summary() -> None:
    masker = Masker()
    topo = parse_topology(read_logs(LOGS / "elastic_summary.log", masker=masker))
    p = topo.place(5)
    assert p is not None and masker.reveal_map()[p.host or ""].startswith("gpu-node-17")
    assert p.local_rank == 1 and "torchelastic summary" in p.basis


def test_slurm_nodelist_places_contiguous_ranks(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "nodelist").write_text("gpu-a[17-18]\n")
    (job / "train.log").write_text("".join(f"[rank{r}]: WORLD_SIZE=8 step 1\n" for r in range(8)))
    masker = Masker()
    bundle = read_logs(job, masker=masker)
    topo = parse_topology(bundle)
    real = masker.reveal_map()
    assert [real[h] for h in bundle.job_hosts] == ["gpu-a17", "gpu-a18"]
    assert [real[topo.ranks[r].host or ""] for r in (0, 3, 4, 7)] == ["gpu-a17", "gpu-a17", "gpu-a18", "gpu-a18"]
    assert topo.ranks[5].local_rank == 1 and "assumed" in topo.ranks[5].basis[0]
    assert "gpu-a[17-18]" not in bundle.text() and "gpu-a1" not in bundle.text()


def test_sacct_output_gives_hosts_and_state(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "sacct.txt").write_text((FIX / "sacct.txt").read_text())
    (job / "train.log").write_text("[rank0]: step 1\n")
    masker = Masker()
    bundle = read_logs(job, masker=masker)
    assert [masker.reveal_map()[h] for h in bundle.job_hosts] == ["gpu-a17", "gpu-a18"]
    assert bundle.job_meta["state"] == "FAILED"
