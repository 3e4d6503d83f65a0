"""features/recovery.py: a transient fault the log shows recovering is not evidence."""

from __future__ import annotations

from denpex_ml.features import FingerprintMatcher
from denpex_ml.features.recovery import drop_recovered
from denpex_ml.logs import read_logs
from denpex_ml.taxonomy import load_taxonomy

ERR = "[rank6]:node-a:22:33 [6] transport/net_ib.cc:199 NCCL WARN NET/IB : {dev} Got async error event: port error"
UP = "[rank6]:node-a:22:33 [6] transport/net_ib.cc:199 NCCL WARN NET/IB : {dev} Got async error event: port active"
STEP = "[rank6]: step {n} loss 1.25"


def _network_hits(*lines: str) -> int:
    bundle = read_logs(text="\n".join(lines) + "\n")
    matcher = FingerprintMatcher(load_taxonomy())
    retained = list(bundle.iter_lines())
    hits = drop_recovered(matcher.scan(retained), retained)
    return sum(1 for h in hits if h.entry_id == "nccl-network-error")


def test_a_port_that_comes_back_is_not_evidence() -> None:
    assert _network_hits(ERR.format(dev="mlx5_2:1"), UP.format(dev="mlx5_2:1"), STEP.format(n=9)) == 0


def test_a_port_that_errs_again_or_never_comes_back_stays_evidence() -> None:
    again = (ERR.format(dev="mlx5_2:1"), UP.format(dev="mlx5_2:1"), ERR.format(dev="mlx5_2:1"))
    assert _network_hits(*again) >= 1
    assert _network_hits(ERR.format(dev="mlx5_2:1"), STEP.format(n=9)) >= 1
    # another port coming back says nothing about this one
    assert _network_hits(ERR.format(dev="mlx5_2:1"), UP.format(dev="mlx5_3:1")) >= 1


def test_the_bundled_unknown_example_is_not_read_as_its_recovered_flap() -> None:
    """data/examples/jobs/unknown: an IB port flap that recovered, then hours later a licence error."""
    from pathlib import Path

    bundle = read_logs(Path(__file__).resolve().parents[2] / "data/examples/jobs/unknown")
    matcher = FingerprintMatcher(load_taxonomy())
    retained = list(bundle.iter_lines())
    before = matcher.scan(retained)
    assert any(h.entry_id == "nccl-network-error" for h in before)
    assert not any(h.entry_id == "nccl-network-error" for h in drop_recovered(before, retained))
