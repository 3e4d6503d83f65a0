"""Two processes naming one GPU in their NCCL communicator lines: duplicate-gpu-assignment."""

from __future__ import annotations

from denpex_ml import classify
from denpex_ml.features.same_gpu import same_gpu_hits
from denpex_ml.logs import read_logs

TWO_ON_ONE = (
    "node-a:2870757:2870757 [0] NCCL INFO comm 0x560c6a8aafd0 rank 0 nranks 2 cudaDev 0 busId 86000 - Init COMPLETE\n"
    "node-a:2870756:2870756 [0] NCCL INFO comm 0x55592676f080 rank 1 nranks 2 cudaDev 0 busId 86000 - Init COMPLETE\n"
)


def _lines(text: str) -> list:  # type: ignore[type-arg]
    return list(read_logs(text=text).iter_lines())


def test_two_processes_on_one_host_and_bus_id_share_a_gpu() -> None:
    hits = same_gpu_hits(_lines(TWO_ON_ONE))
    assert [h.entry_id for h in hits] == ["duplicate-gpu-assignment"]
    assert "2870756" in hits[0].line.text and hits[0].role.value == "root-cause"


def test_one_process_with_several_communicators_or_other_hosts_do_not() -> None:
    # the same pid names its GPU once per communicator (tensor- and data-parallel groups)
    same_pid = TWO_ON_ONE.replace("2870756:2870756", "2870757:2870757")
    assert same_gpu_hits(_lines(same_pid)) == []
    # the same bus id on two hosts is two GPUs
    assert same_gpu_hits(_lines(TWO_ON_ONE.replace("node-a:2870756", "node-b:2870756"))) == []
    # different bus ids on one host: one GPU each
    assert same_gpu_hits(_lines(TWO_ON_ONE.replace("busId 86000 - Init COMPLETE\n", "busId 87000 - Init COMPLETE\n", 1))) == []


def test_the_diagnosis_names_two_ranks_on_one_gpu_from_the_communicator_lines() -> None:
    text = TWO_ON_ONE + (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 39, in __init__\n'
        "    self.model = DDP(self.model, device_ids=[self.local_rank])\n"
    )
    d = classify(text=text)
    assert d.label == "duplicate-gpu-assignment", d.alternatives[:3]
    assert any("same GPU bus id" in e.why or "busId" in e.text for e in d.evidence)
