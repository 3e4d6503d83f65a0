"""The decision a diagnosis reports, given the model's probabilities.

The probabilities are fixed here (the model's public ``predict_proba`` is replaced on one
loaded instance), so each rule of the decision is checked on its own with exact figures:
answer above the abstention threshold; ``unknown`` below it, with the confidence that the
answer is *not* the best entry (``1 - p(best)``); a hang below the threshold answered when its
family together is likely; ``no-failure`` when the log shows no failure evidence at all, unless
the best failure entry is confidently likely (``unknown`` for a model without that class); the
hang prior when the hang analysis finds a hang. With a learned out-of-taxonomy detector,
``unknown`` when it fires, whatever the top probability.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest

from denpex_ml.errors import ModelError
from denpex_ml.model.core import DenpexModel, load_model
from denpex_ml.model.featurize import JobAnalysis
from denpex_ml.taxonomy.groups import HANG_IDS

OOM = "[rank0]: step 10 loss 2.0\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
HEALTHY = "hello world\njust a line\nstep 10 loss 2.31\n"
WATCHDOG = "".join(
    f"[rank{r}]:[E1201 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
    f"timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600042 "
    "milliseconds before timing out.\n"
    for r in range(4)
)


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> DenpexModel:
    """A private instance of the shipped model (loads in seconds; the suite's tiny model when the
    shipped one cannot be loaded): its ``predict_proba`` is replaced below, and its abstention
    threshold set to 0.5 and its confidence left unrecalibrated so that the figures below read
    plainly (the recalibration has its own test in ``tests/model/test_model.py``)."""
    try:
        m = load_model()
    except ModelError:
        m = load_model(request.getfixturevalue("tiny_model_dir"))
    m.abstain_threshold = 0.5
    m.confidence_map = (1.0, 0.0)
    m.outside = None  # the threshold rule; the learned detector's rule is tested on its own below
    return m


def _fix_proba(model: DenpexModel, monkeypatch: pytest.MonkeyPatch, **mass: float) -> np.ndarray:
    """Make ``model`` score every job with ``mass`` (label -> probability) and the rest of the
    probability spread evenly over the other entries."""
    labels = model.labels
    p = np.zeros(len(labels))
    for label, v in mass.items():
        p[labels.index(label.replace("_", "-"))] = v
    rest = [i for i, lab in enumerate(labels) if lab.replace("-", "_") not in mass]
    p[rest] = (1.0 - sum(mass.values())) / len(rest)
    assert p.max() == max(mass.values())  # the entries given are the likeliest

    def predict_proba(analyses: Iterable[JobAnalysis]) -> np.ndarray:
        return np.stack([p for _ in analyses])

    monkeypatch.setattr(model, "predict_proba", predict_proba)
    return p


def test_above_the_threshold_the_best_entry_is_the_answer(model: DenpexModel, monkeypatch: pytest.MonkeyPatch) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.6)
    d = model.classify(text=OOM)
    assert d.label == "cuda-oom" and not d.abstained
    assert d.confidence == pytest.approx(0.6)
    assert d.initiating_rank == 1


def test_below_the_threshold_unknown_with_the_mass_not_on_the_best_entry(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.4)
    d = model.classify(text=OOM)
    assert d.label == "unknown" and d.abstained
    assert d.confidence == pytest.approx(0.6)  # 1 - p(best)
    assert d.best_guess == "cuda-oom"


def test_a_hang_below_the_threshold_is_answered_when_its_family_is_likely(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert model.family_threshold <= 0.6
    model.hang_prior = 1.0  # the family rule on its own (the hang prior is tested below)
    _fix_proba(model, monkeypatch, subset_rank_collective_hang=0.4, host_work_timeout=0.2)
    d = model.classify(text=WATCHDOG)
    assert d.label == "subset-rank-collective-hang" and d.confidence == pytest.approx(0.4)


def test_the_same_split_over_crash_entries_is_unknown(model: DenpexModel, monkeypatch: pytest.MonkeyPatch) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.4, host_oom=0.2)
    assert model.classify(text=OOM).label == "unknown"


def test_no_failure_evidence_is_no_failure_when_a_failure_entry_is_only_fairly_likely(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # above the abstention threshold, but on a log without a single error line that is no answer:
    # not "unknown" either (a failure the taxonomy cannot name) - the log shows no failure
    assert model.abstain_threshold < 0.55 < model.no_evidence_answer
    _fix_proba(model, monkeypatch, cuda_oom=0.55, no_failure=0.02)
    d = model.classify(text=HEALTHY)
    assert d.label == "no-failure" and d.no_failure and not d.abstained
    assert d.confidence == pytest.approx(0.45)
    assert d.best_guess == "cuda-oom" and d.initiating_rank is None


CUT_TRACEBACK = (
    "[rank0]: step 10 loss 2.31\n"
    '[rank1]:   File "/opt/train.py", line 88, in <module>\n'
    '[rank1]:   File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 2169, in step\n'
)


def test_a_traceback_cut_before_its_exception_line_is_failure_evidence(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the paste stops before the exception's own line, but a stack was printed: the log shows a
    # failure, so its likeliest entry is weighed as for any failure log (here above the
    # threshold), not "no failure found" as for the same figures on a log without one (above);
    # the innermost frame is the evidence shown
    _fix_proba(model, monkeypatch, cuda_oom=0.55, no_failure=0.02)
    d = model.classify(text=CUT_TRACEBACK)
    assert d.label == "cuda-oom" and d.confidence == pytest.approx(0.55)
    assert [e.text.strip() for e in d.evidence] == [
        'File "/opt/conda/lib/python3.11/site-packages/deepspeed/runtime/engine.py", line 2169, in step'
    ]
    assert "Python traceback" in d.evidence[0].why


def test_without_a_no_failure_class_a_log_without_evidence_is_unknown(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a model trained before the no-failure class (or on a taxonomy without it) cannot say "none
    # found": it abstains, with the confidence that the answer is not its best failure entry
    from denpex_ml.model import core

    _fix_proba(model, monkeypatch, cuda_oom=0.55, no_failure=0.02)
    monkeypatch.setattr(core, "NO_FAILURE_ID", "no-such-class")
    d = model.classify(text=HEALTHY)
    assert d.label == "unknown" and d.abstained
    assert d.confidence == pytest.approx(0.45)


def test_no_failure_evidence_but_a_confident_failure_entry_is_answered(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an error the line detectors do not know (the head read it from the embedded lines)
    _fix_proba(model, monkeypatch, cuda_oom=0.9, no_failure=0.02)
    d = model.classify(text=HEALTHY)
    assert d.label == "cuda-oom" and d.confidence == pytest.approx(0.9)


def test_no_failure_evidence_and_no_failure_likelier_than_any_failure(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, no_failure=0.3, cuda_oom=0.2)
    d = model.classify(text=HEALTHY)
    assert d.label == "no-failure" and d.no_failure
    assert d.confidence == pytest.approx(0.3 / 0.5)  # its share against the best failure entry


def test_with_failure_evidence_a_likely_no_failure_does_not_hide_the_failure(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.55)
    assert model.classify(text=OOM).label == "cuda-oom"
    assert model.classify(text=HEALTHY).label == "no-failure"  # same scores, no evidence


def test_a_hang_is_never_no_failure_and_the_hang_entries_weigh_more(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the head alone: no-failure 0.35, a transport entry 0.3, a hang entry 0.25
    p = _fix_proba(model, monkeypatch, no_failure=0.35, nccl_network_error=0.3, subset_rank_collective_hang=0.25)
    assert model.hang_prior > 1.5
    d = model.classify(text=WATCHDOG)
    assert d.hang is not None  # the analysis found the hang ...
    assert d.label == "subset-rank-collective-hang"  # ... so the hang entry outranks the transport one
    assert "no-failure" not in [a.label for a in d.alternatives]
    hang = np.asarray([lab in HANG_IDS for lab in model.labels])
    q = np.where(hang, p * model.hang_prior, p)
    q[model.labels.index("no-failure")] = 0.0
    assert d.confidence == pytest.approx(q[model.labels.index("subset-rank-collective-hang")] / q.sum())


def test_without_a_hang_the_head_probabilities_stand(model: DenpexModel, monkeypatch: pytest.MonkeyPatch) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.55, subset_rank_collective_hang=0.3)
    d = model.classify(text=OOM)
    assert d.hang is None and d.label == "cuda-oom" and d.confidence == pytest.approx(0.55)


def test_the_hang_prior_can_be_switched_off(model: DenpexModel, monkeypatch: pytest.MonkeyPatch) -> None:
    _fix_proba(model, monkeypatch, nccl_network_error=0.6, subset_rank_collective_hang=0.2)
    model.hang_prior = 1.0
    d = model.classify(text=WATCHDOG)
    assert d.label == "nccl-network-error" and d.confidence == pytest.approx(0.6)


CAPACITY = (
    "Launching training job sagemaker-test-1\n"
    "ValueError: Error for Training job sagemaker-test-1: Failed Reason: CapacityError: Unable to provision "
    "requested ML compute capacity. Please retry using a different ML instance type.\n"
)


def test_a_failure_known_to_lie_outside_the_taxonomy_is_unknown_however_likely_an_entry(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the cloud refused capacity: nothing of the job ran, so no taxonomy entry is its cause
    _fix_proba(model, monkeypatch, uncaught_exception_crash=0.9)
    d = model.classify(text=CAPACITY)
    assert d.label == "unknown" and d.abstained
    assert d.best_guess == "uncaught-exception-crash"
    assert d.confidence == pytest.approx(0.8)  # the fingerprint's weight: more than 1 - 0.9
    assert d.outside_taxonomy.startswith("The cloud could not provide the requested accelerator instances")
    assert "a failure outside the taxonomy: The cloud could not provide" in d.headline()
    assert d.to_dict()["outside_taxonomy"] == d.outside_taxonomy
    assert d.unknown_reason == "outside-fingerprint"
    assert d.evidence and d.evidence[0].why.startswith("root-cause of unknown")


def test_an_entry_whose_own_root_cause_weighs_more_still_wins_over_an_outside_fingerprint(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.9)
    d = model.classify(text=CAPACITY + OOM)
    assert d.label == "cuda-oom" and d.outside_taxonomy == ""


def _with_detector(model: DenpexModel, monkeypatch: pytest.MonkeyPatch, p_outside: float) -> None:
    """Give ``model`` a detector (firing at 0.5) that says ``p_outside`` for every job."""
    from denpex_ml.model.outside import OutsideDetector

    model.outside = OutsideDetector({}, threshold=0.5)
    monkeypatch.setattr(model, "outside_proba", lambda a, proba, x=None: p_outside)


def test_with_a_detector_unknown_when_it_fires_even_above_the_threshold(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, cuda_oom=0.6)
    _with_detector(model, monkeypatch, 0.7)
    d = model.classify(text=OOM)
    assert d.label == "unknown" and d.abstained
    assert d.confidence == pytest.approx(0.7)  # the detector's probability
    assert d.best_guess == "cuda-oom"
    assert d.unknown_reason == "detector" and d.outside_probability == pytest.approx(0.7)
    assert "judged outside the taxonomy (70%); the closest entry, cuda-oom, has 60%" in d.headline()
    assert d.to_dict()["outside_probability"] == pytest.approx(0.7) and d.to_dict()["unknown_reason"] == "detector"


def test_with_a_detector_that_does_not_fire_an_unsure_answer_is_given(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # below the old threshold: the threshold rule would abstain, the detector says "known"
    _fix_proba(model, monkeypatch, cuda_oom=0.4, host_oom=0.2)
    _with_detector(model, monkeypatch, 0.2)
    d = model.classify(text=OOM)
    assert d.label == "cuda-oom" and not d.abstained and d.confidence == pytest.approx(0.4)
    assert d.unknown_reason == "" and d.outside_probability == pytest.approx(0.2)


def test_a_log_without_failure_evidence_stays_no_failure_whatever_the_detector_says(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fix_proba(model, monkeypatch, no_failure=0.3, cuda_oom=0.2)
    _with_detector(model, monkeypatch, 0.9)
    assert model.classify(text=HEALTHY).label == "no-failure"


def test_a_hang_whose_family_is_likely_is_answered_even_when_the_detector_fires(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a known hang worded unfamiliarly (a gloo reproduction, say) is not a failure outside the taxonomy
    model.hang_prior = 1.0
    _fix_proba(model, monkeypatch, host_work_timeout=0.5, subset_rank_collective_hang=0.2)
    _with_detector(model, monkeypatch, 0.9)
    d = model.classify(text=WATCHDOG)
    assert d.label == "host-work-timeout" and d.confidence == pytest.approx(0.5)
    # the same split over crash entries is not spared
    _fix_proba(model, monkeypatch, cuda_oom=0.5, host_oom=0.2)
    assert model.classify(text=OOM).label == "unknown"


def test_with_a_detector_a_best_entry_below_the_floor_is_unknown(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from denpex_ml.model.outside import ANSWER_FLOOR

    _fix_proba(model, monkeypatch, cuda_oom=ANSWER_FLOOR - 0.05, host_oom=0.1)
    _with_detector(model, monkeypatch, 0.1)
    d = model.classify(text=OOM)
    assert d.label == "unknown" and d.confidence == pytest.approx(1.0 - (ANSWER_FLOOR - 0.05))
    assert d.unknown_reason == "unsure" and "no taxonomy entry fits well" in d.headline()


def test_with_a_detector_an_unsure_no_failure_on_a_log_with_a_failure_is_unknown(
    model: DenpexModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # above the floor, below the abstention threshold (0.5 here): the log shows an error, so
    # leaning to "no failure" is not an answer (the bundled "unknown" example, a licence error)
    _fix_proba(model, monkeypatch, no_failure=0.3, cuda_oom=0.2)
    _with_detector(model, monkeypatch, 0.1)
    d = model.classify(text=OOM)
    assert d.label == "unknown" and d.unknown_reason == "unsure"
    assert d.confidence == pytest.approx(0.7)
    # sure of it, it is answered
    _fix_proba(model, monkeypatch, no_failure=0.6, cuda_oom=0.2)
    assert model.classify(text=OOM).label == "no-failure"
    # and a log without failure evidence stays no-failure however unsure
    _fix_proba(model, monkeypatch, no_failure=0.3, cuda_oom=0.2)
    assert model.classify(text=HEALTHY).label == "no-failure"
