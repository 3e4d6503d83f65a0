"""Kernel / nvidia-smi / DCGM members are recognised, their host learned and masked, their
hardware lines parsed into events."""

from __future__ import annotations

from pathlib import Path

import pytest

from denpex_ml.logs import read_logs
from denpex_ml.logs.masking import Masker
from denpex_ml.logs.system import expand_hostlist, host_from_name, system_kind
from denpex_ml.taxonomy import load_taxonomy
from denpex_ml.topology import hardware_events

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "topology"


@pytest.mark.parametrize(
    ("name", "head", "kind"),
    [("gpu-a17/dmesg.txt", b"", "kernel"), ("kern.log", b"", "kernel"), ("journalctl-k.txt", b"", "kernel"),
     ("node-3/nvidia-smi-q.txt", b"", "nvidia-smi"), ("dcgmi-health.txt", b"", "dcgm"), ("sacct.txt", b"", "sacct"),
     ("nodelist", b"", "nodelist"), ("x.txt", b"\n==============NVSMI LOG==============\n", "nvidia-smi"),
     ("x.txt", b"[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "kernel"), ("rank3.log", b"[rank3]: hi", None),
     ("kernels.py", b"import torch", None)],
)  # fmt: skip
def test_system_members_are_recognised(name: str, head: bytes, kind: str | None) -> None:
    assert system_kind(name, head) == kind


def test_host_from_name_and_hostlists() -> None:
    assert host_from_name("dmesg-gpu-a17.log") == "gpu-a17"
    assert host_from_name("logs/gpu-a17/nvidia-smi.txt") == "gpu-a17"
    assert host_from_name("gpu-a17.dmesg") == "gpu-a17"
    assert host_from_name("rank3/dmesg.log") is None and host_from_name("2024-05-01/dmesg") is None
    assert expand_hostlist("gpu-[001-002,9],login1") == ["gpu-001", "gpu-002", "gpu-9", "login1"]


def _job(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_dmesg_xid_parsed_to_host_bus_xid_time(tmp_path: Path) -> None:
    job = _job(tmp_path, {"gpu-b22/dmesg.txt": (FIX / "dmesg_xid79.txt").read_text()})
    masker = Masker()
    bundle = read_logs(job, masker=masker)
    events = hardware_events(bundle.system, load_taxonomy())
    xid = next(e for e in events if e.kind == "xid")
    assert (masker.reveal_map()[xid.host or ""], xid.bus_id, xid.xid, xid.time) == (
        "gpu-b22",
        "0000:86:00",
        79,
        "8812.113209",
    )
    assert xid.hardware and xid.entry == "gpu-fallen-off-bus"
    assert "usb" not in " ".join(s.text for s in bundle.system)  # only hardware lines are kept
    assert all("gpu-b22" not in s.source for s in bundle.system)


def test_journalctl_host_field_is_learned_and_masked(tmp_path: Path) -> None:
    job = _job(tmp_path, {"journal.txt": (FIX / "journalctl_k.txt").read_text()})
    masker = Masker()
    bundle = read_logs(job, masker=masker)
    assert "gpu-b22" not in bundle.text() and "gpu-b22" not in str(bundle.system)
    events = hardware_events(bundle.system, load_taxonomy())
    by_xid = {e.xid: e for e in events if e.kind == "xid"}
    assert by_xid[94].entry == "gpu-xid-ecc-error" and by_xid[94].hardware
    assert masker.reveal_map()[by_xid[94].host or ""] == "gpu-b22"
    assert by_xid[94].time == "May 01 10:04:58"


def test_nvidia_smi_ecc_and_row_remap_with_gpu_index(tmp_path: Path) -> None:
    job = _job(tmp_path, {"gpu-b22/nvidia-smi-q.txt": (FIX / "nvidia_smi_q.txt").read_text()})
    events = hardware_events(read_logs(job).system, load_taxonomy())
    assert {(e.kind, e.gpu, e.bus_id) for e in events} == {
        ("ecc", 3, "0000:86:00"),
        ("row-remap", 3, "0000:86:00"),
    }
    assert len([e for e in events if e.kind == "ecc"]) == 2  # DRAM Uncorrectable 2, Remapped Uncorrectable 1


def test_dcgm_health_names_the_gpu(tmp_path: Path) -> None:
    job = _job(tmp_path, {"gpu-b22/dcgm-health.txt": (FIX / "dcgm_health.txt").read_text()})
    events = hardware_events(read_logs(job).system, load_taxonomy())
    assert {e.gpu for e in events} == {2} and all(e.hardware for e in events)


def test_system_kind_by_one_set_equals_the_searches_in_turn() -> None:
    """``system_kind`` reads a member's head with one RE2 set: the kind the four head patterns,
    tried in turn, would give."""
    import random

    from denpex_ml.logs import system

    def in_turn(head: bytes) -> str | None:
        for rx, kind in (
            (system._HEAD_NVSMI, "nvidia-smi"),
            (system._HEAD_SACCT, "sacct"),
            (system._HEAD_DCGM, "dcgm"),
            (system._HEAD_KERNEL, "kernel"),
        ):
            if rx.search(head):
                return kind
        return None

    rng = random.Random(3)
    parts = [
        b"==== NVSMI LOG ====", b"GPU 00000000:3B:00.0", b"Health Monitor Report", b"dcgmi diag", b"[  12.5] NVRM: Xid",
        b"Apr 9 host kernel: nvidia", b"JobID|JobName|NodeList", b"jobid|x|nodelist", b"\n", b" ", b"mlx5", b"\xe9",
    ]  # fmt: skip
    for _ in range(3000):
        head = b"".join(rng.choice(parts) for _ in range(rng.randint(0, 10)))
        assert system.system_kind("rank1.log", head) == in_turn(head), head
