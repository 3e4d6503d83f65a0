"""dataset/prequential.py: the test-then-train records, kept per batch, pooled, and the confidence recalibration fitted on them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from denpex_ml.dataset.prequential import (
    PrequentialRow,
    abstention_replay,
    confidence_map_check,
    detector_replay,
    fit_confidence_map,
    load_prequential,
    pool_files,
    pool_latest,
    summarise,
    summary_table,
    write_prequential,
)


def _row(i: int, label: str, predicted: str, confidence: float = 0.9, rule: str = "unknown") -> PrequentialRow:
    return PrequentialRow(
        id=f"x-{i}",
        source=f"https://example.org/{i}",
        label=label,
        group="crash" if label == "cuda-oom" else ("unknown" if label == "unknown" else "hang"),
        label_confidence="confirmed",
        predicted=predicted,
        confidence=confidence,
        top3=(predicted, "host-oom", "cuda-oom"),
        rule=rule,
        initiating_rank=None,
        predicted_rank=None,
        rank_visible=False,
        seconds=0.01,
    )


def _write(d: Path, batch: str, model: str, when: str, rows: list[PrequentialRow]) -> None:
    out = write_prequential(rows, d / f"{batch}__{model}.json", batch=batch, model_id=f"default@{model}")
    payload = json.loads(out.read_text())
    payload["scored_at"] = when
    out.write_text(json.dumps(payload))


def test_summarise_counts_abstention_right_only_on_unknown_logs() -> None:
    rows = [
        _row(0, "cuda-oom", "cuda-oom", rule="cuda-oom"),
        _row(1, "cuda-oom", "unknown"),
        _row(2, "unknown", "unknown"),
        _row(3, "unknown", "cuda-oom"),
    ]
    s = summarise(rows)
    assert s["known"]["n"] == 2 and s["known"]["top1"] == 0.5 and s["known"]["rule_top1"] == 0.5
    assert s["unknown_recall"] == 0.5  # one of the two unknown logs abstained on
    assert s["unknown_precision"] == 0.5  # one of the two abstentions was on an unknown log
    assert s["known"]["top3"] == 1.0  # the abstained cuda-oom is still among the three best


def test_the_summary_table_has_a_row_per_group_with_rows_and_the_known_logs_line() -> None:
    rows = [_row(0, "cuda-oom", "cuda-oom", rule="cuda-oom"), _row(1, "unknown", "unknown")]
    lines = summary_table(summarise(rows))
    firsts = [ln.split()[0] for ln in lines]
    assert firsts[:4] == ["group", "all", "crash", "unknown"]  # empty groups are left out
    assert lines[-1].startswith("known: top1 1.000 top3 1.000 rules 1.000 (n 1)")


def test_a_healthy_log_that_states_a_rank_does_not_count_for_the_rank_figure() -> None:
    from dataclasses import replace

    crashed = replace(_row(0, "cuda-oom", "cuda-oom"), initiating_rank=3, predicted_rank=3, rank_visible=True)
    healthy = replace(_row(1, "no-failure", "no-failure"), initiating_rank=0, rank_visible=True)
    s = summarise([crashed, healthy])
    assert s["all"]["rank_n"] == 1 and s["all"]["rank_accuracy"] == 1.0


def test_pooled_batches_take_the_newest_model_that_scored_each(tmp_path: Path) -> None:
    right = [_row(i, "cuda-oom", "cuda-oom") for i in range(3)]
    wrong = [_row(i, "cuda-oom", "host-oom") for i in range(3)]
    # batch a: scored by model 1 only; batch b: by model 1, then (later) by the newer model 2
    _write(tmp_path, "collected-a.jsonl", "m1", "2026-12-01T01:00:00Z", wrong)
    _write(tmp_path, "collected-b.jsonl", "m2", "2026-12-01T02:00:01Z", right)
    _write(tmp_path, "collected-b.jsonl", "m1", "2026-12-01T02:00:05Z", wrong)  # the older model, scored last
    _write(tmp_path, "collected-c.jsonl", "m3", "2026-12-01T03:00:00Z", right)
    (tmp_path / "notes.json").write_text("[1, 2]")  # not a prequential file: skipped
    _write(tmp_path, "reproduced.jsonl", "m3", "2026-12-01T04:00:00Z", wrong)  # not real logs: not pooled
    pooled = pool_latest(tmp_path, last=2)
    assert pooled is not None
    assert pooled["batches"] == ["collected-b.jsonl", "collected-c.jsonl"]
    assert pooled["files"] == ["collected-b.jsonl__m2.json", "collected-c.jsonl__m3.json"]
    assert pooled["summary"]["known"]["n"] == 6 and pooled["summary"]["known"]["top1"] == 1.0
    everything = pool_latest(tmp_path, last=10)
    assert everything is not None and everything["summary"]["known"]["top1"] == pytest.approx(6 / 9)
    batches = [p["batch"] for p in load_prequential(tmp_path)]
    assert batches == [
        "collected-a.jsonl",
        "collected-b.jsonl",
        "collected-b.jsonl",
        "collected-c.jsonl",
        "reproduced.jsonl",
    ]


def test_chosen_files_pool_their_rows_whatever_model_scored_them(tmp_path: Path) -> None:
    right = [_row(i, "cuda-oom", "cuda-oom") for i in range(3)]
    wrong = [_row(i, "cuda-oom", "host-oom") for i in range(3)]
    _write(tmp_path, "collected-a.jsonl", "old", "2026-12-01T01:00:00Z", wrong)
    _write(tmp_path, "collected-a.jsonl", "new", "2026-12-01T02:00:00Z", right)
    _write(tmp_path, "collected-b.jsonl", "old", "2026-12-01T03:00:00Z", right)
    # the old model on both batches: not what pool_latest picks for batch a
    chosen = pool_files([tmp_path / "collected-a.jsonl__old.json", tmp_path / "collected-b.jsonl__old.json"])
    assert chosen["batches"] == ["collected-a.jsonl", "collected-b.jsonl"]
    assert chosen["summary"]["known"]["n"] == 6 and chosen["summary"]["known"]["top1"] == 0.5
    newest = pool_latest(tmp_path)
    assert newest is not None and newest["summary"]["known"]["top1"] == 1.0


def test_a_file_that_is_not_a_kept_figure_is_a_typed_error(tmp_path: Path) -> None:
    from denpex_ml.errors import DatasetError

    (tmp_path / "notes.json").write_text("[1, 2]")
    (tmp_path / "broken.json").write_text("{")
    for name in ("notes.json", "broken.json", "absent.json"):
        with pytest.raises(DatasetError, match=name):
            pool_files([tmp_path / name])


def test_no_kept_files_no_pool(tmp_path: Path) -> None:
    assert pool_latest(tmp_path) is None
    assert pool_latest(tmp_path / "absent") is None


def test_confidence_map_fitted_on_unseen_batches_pulls_an_overconfident_model_down(tmp_path: Path) -> None:
    # answers stated at 0.95 that are right 70% of the time, at 0.6 right 50% of the time
    for b in range(3):
        rows = [_row(10 * b + i, "cuda-oom", "cuda-oom" if i < 7 else "host-oom", 0.95) for i in range(10)]
        rows += [_row(100 + 10 * b + i, "cuda-oom", "cuda-oom" if i < 5 else "host-oom", 0.6) for i in range(10)]
        rows += [_row(200 + b, "unknown", "unknown", 0.7)]  # abstentions are not answers: not fitted on
        _write(tmp_path, f"collected-b{b}.jsonl", f"m{b}", f"2026-12-0{b + 1}T00:00:00", rows)
    fitted = fit_confidence_map(tmp_path)
    assert fitted is not None
    (a, b), info = fitted
    assert 0 < a < 1 and info["rows"] == 60 and info["ece_after_in_sample"] < info["ece_before"]

    def mapped(c: float) -> float:
        return float(1 / (1 + np.exp(-(a * np.log(c / (1 - c)) + b))))

    assert abs(mapped(0.95) - 0.7) < 0.02 and abs(mapped(0.6) - 0.5) < 0.02
    assert fit_confidence_map(tmp_path, last=2) is None  # 40 answers: too few to fit on
    # a batch kept out of training (to measure the model on) is not fitted on either
    assert fit_confidence_map(tmp_path, among={"collected-b0.jsonl", "collected-b1.jsonl"}) is None
    assert fit_confidence_map(tmp_path, among={f"collected-b{b}.jsonl" for b in range(3)}) == fitted


def test_the_recalibration_is_judged_on_batches_it_was_not_fitted_on(tmp_path: Path) -> None:
    for b in range(4):  # each batch overconfident alike: 0.95 stated, 70% right
        rows = [_row(10 * b + i, "cuda-oom", "cuda-oom" if i < 14 else "host-oom", 0.95) for i in range(20)]
        _write(tmp_path, f"collected-b{b}.jsonl", f"m{b}", f"2026-12-0{b + 1}T00:00:00", rows)
    check = confidence_map_check(tmp_path)  # each batch recalibrated by the map of the other three
    assert check is not None and check["rows"] == 80
    assert check["ece_before"] == pytest.approx(0.25) and check["ece_after"] < 0.02
    # with two batches the other one holds too few answers to fit on: nothing changes
    two = confidence_map_check(tmp_path, among={"collected-b0.jsonl", "collected-b1.jsonl"})
    assert two is not None and two["ece_after"] == two["ece_before"]


def test_a_batch_scored_by_a_recalibrated_model_enters_the_fit_on_the_heads_scale(tmp_path: Path) -> None:
    """The new map is applied to the head's confidences: a batch whose stated confidences already
    went through the scoring model's map must be fitted on what the head said, not on those."""
    first_map = (0.5, -0.2)

    def stated(c: float) -> float:
        return float(1 / (1 + np.exp(-(first_map[0] * np.log(c / (1 - c)) + first_map[1]))))

    raw_dir, mixed_dir = tmp_path / "raw", tmp_path / "mixed"
    for b in range(3):  # the head says 0.95 and is right 70% of the time, says 0.6 and is right 50%
        rows = [(i, "cuda-oom" if i < 7 else "host-oom", 0.95) for i in range(10)]
        rows += [(100 + i, "cuda-oom" if i < 5 else "host-oom", 0.6) for i in range(10)]
        raw = [_row(10 * b + i, "cuda-oom", p, c) for i, p, c in rows]
        when = f"2026-12-0{b + 1}T00:00:00"
        _write(raw_dir, f"collected-b{b}.jsonl", f"m{b}", when, raw)
        if b == 2:  # the newest batch was scored by a model that recalibrated its confidences
            out = write_prequential(
                [_row(10 * b + i, "cuda-oom", p, stated(c)) for i, p, c in rows],
                mixed_dir / f"collected-b{b}.jsonl__m{b}.json",
                batch=f"collected-b{b}.jsonl",
                model_id=f"default@m{b}",
                confidence_map=first_map,
            )
            payload = json.loads(out.read_text())
            assert payload["confidence_map"] == list(first_map)
            payload["scored_at"] = when
            out.write_text(json.dumps(payload))
        else:
            _write(mixed_dir, f"collected-b{b}.jsonl", f"m{b}", when, raw)
    on_raw, on_mixed = fit_confidence_map(raw_dir), fit_confidence_map(mixed_dir)
    assert on_raw is not None and on_mixed is not None
    assert on_mixed[0] == pytest.approx(on_raw[0], abs=1e-4)
    assert on_mixed[1]["ece_before"] == pytest.approx(on_raw[1]["ece_before"], abs=1e-4)


def test_abstention_replay_answers_above_the_threshold_by_the_best_guess(tmp_path: Path) -> None:
    """An abstention at head-scale 0.4 (stated 0.6) answers its first alternative at a threshold
    of 0.3 and stays `unknown` at 0.5; an answer stated through a recalibration is replayed on the
    head's scale; a healthy answer stays whatever the threshold."""
    cmap = (0.5, 0.0)  # stated = sigmoid(0.5 * logit(head))
    head = 0.8
    stated = float(1 / (1 + np.exp(-(cmap[0] * np.log(head / (1 - head)) + cmap[1]))))
    rows = [
        _row(0, "cuda-oom", "unknown", 0.6),  # top3[0] is "unknown" in _row: give it a guess below
        _row(1, "unknown", "unknown", 0.6),
        _row(2, "cuda-oom", "cuda-oom", stated),
        _row(3, "no-failure", "no-failure", 0.1),
    ]
    rows[0] = PrequentialRow(**{**rows[0].__dict__, "top3": ("cuda-oom", "host-oom", "unknown")})
    rows[1] = PrequentialRow(**{**rows[1].__dict__, "top3": ("host-oom", "cuda-oom", "unknown")})
    out = write_prequential(
        rows,
        tmp_path / "collected-a.jsonl__m.json",
        batch="collected-a.jsonl",
        model_id="default@m",
        confidence_map=cmap,
    )
    assert out.exists()
    replay = abstention_replay(tmp_path, thresholds=(0.3, 0.5, 0.85))
    assert replay is not None
    low, mid, high = replay
    # 0.3: everything answered; the OOT log's guess is wrong -> 3 of 4
    assert low["abstentions"] == 0 and low["accuracy"] == pytest.approx(0.75)
    # 0.5: both abstentions stay (0.4 < 0.5), the recalibrated answer (head 0.8) stays answered
    assert mid["abstentions"] == 2 and mid["unknown_recall"] == 1.0 and mid["unknown_precision"] == 0.5
    assert mid["known_top1"] == pytest.approx(2 / 3)
    # 0.85: the answer at head 0.8 abstains too (its stated 0.67 would not have), the healthy one never
    assert high["abstentions"] == 3
    assert abstention_replay(tmp_path / "none") is None


def test_abstention_replay_reads_the_recorded_best_probability_of_a_detector_abstention(tmp_path: Path) -> None:
    """When the out-of-taxonomy detector decided, an abstention states the detector's probability
    (0.9 here), not one minus the head's best: the replay reads the recorded best (0.7) instead."""
    row = PrequentialRow(
        **{
            **_row(0, "cuda-oom", "unknown", 0.9).__dict__,
            "top3": ("cuda-oom", "host-oom", "unknown"),
            "unknown_reason": "detector",
            "best_probability": 0.7,
            "outside_probability": 0.9,
        }
    )
    write_prequential([row], tmp_path / "collected-a.jsonl__m.json", batch="collected-a.jsonl", model_id="default@m")
    kept = json.loads((tmp_path / "collected-a.jsonl__m.json").read_text())["rows"][0]
    assert kept["unknown_reason"] == "detector" and kept["best_probability"] == 0.7
    replay = abstention_replay(tmp_path, thresholds=(0.5, 0.75))
    assert replay is not None
    at_half, at_three_quarters = replay
    assert at_half["abstentions"] == 0 and at_half["known_top1"] == 1.0  # 0.7 >= 0.5: its best guess answers
    assert at_three_quarters["abstentions"] == 1  # read as 1 - 0.9 = 0.1 it would abstain at 0.5 too


def test_detector_replay_moves_only_the_answers_the_detector_decided(tmp_path: Path) -> None:
    """A known log the detector scored 0.4 abstains at a threshold of 0.35 and answers its best guess
    at 0.45; an out-of-taxonomy log the detector scored 0.5 is caught at both; an abstention for a
    failure the taxonomy places outside it stays `unknown` at every threshold, whatever the
    detector said; a row of a model without a detector is left out."""

    def scored(i: int, label: str, predicted: str, outside: float | None, reason: str | None = None) -> PrequentialRow:
        return PrequentialRow(
            **{
                **_row(i, label, predicted).__dict__,
                "top3": ("cuda-oom", "host-oom", "unknown"),
                "unknown_reason": reason,
                "outside_probability": outside,
            }
        )

    rows = [
        scored(0, "cuda-oom", "cuda-oom", 0.4),
        scored(1, "unknown", "unknown", 0.5, "detector"),
        scored(2, "unknown", "unknown", 0.01, "outside-fingerprint"),
        scored(3, "cuda-oom", "cuda-oom", None),
    ]
    write_prequential(rows, tmp_path / "collected-a.jsonl__m.json", batch="collected-a.jsonl", model_id="default@m")
    replay = detector_replay(tmp_path, thresholds=(0.35, 0.45, 0.9))
    assert replay is not None
    low, mid, high = replay
    assert low["n"] == 3
    assert low["abstentions"] == 3 and low["known_top1"] == 0.0 and low["unknown_precision"] == pytest.approx(2 / 3)
    assert mid["abstentions"] == 2 and mid["known_top1"] == 1.0 and mid["unknown_recall"] == 1.0
    # 0.9: the detector's own catch is answered by its best guess; the taxonomy's outside entry stays
    assert high["abstentions"] == 1 and high["unknown_recall"] == 0.5 and high["accuracy"] == pytest.approx(2 / 3)
    assert detector_replay(tmp_path / "none") is None


_PREQ_SCRIPT = Path(__file__).resolve().parents[2] / "eval" / "prequential.py"


def _prequential_script() -> Any:
    spec = importlib.util.spec_from_file_location("prequential_script", _PREQ_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(rid: str, source: str) -> str:
    return json.dumps(
        {"id": rid, "label": "cuda-oom", "log": "torch.OutOfMemoryError: CUDA out of memory.", "source": source}
    )


def test_scoring_a_batch_that_repeats_a_held_thread_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held, out = tmp_path / "held", tmp_path / "out"
    held.mkdir()
    (held / "collected-old.jsonl").write_text(_record("old-7", "https://github.com/org/repo/issues/7") + "\n")
    batch = tmp_path / "collected-new.jsonl"
    batch.write_text(
        _record("new-7", "https://github.com/Org/Repo/pull/7#discussion_r1")
        + "\n"
        + _record("new-8", "https://github.com/org/repo/issues/8")
        + "\n"
    )
    script = _prequential_script()
    with pytest.raises(SystemExit) as exc:
        script.main([str(batch), "--held", str(held), "--out-dir", str(out)])
    assert exc.value.code == 2
    assert "1 incident(s) from threads already held: 'new-7' (held as 'old-7')" in capsys.readouterr().err
    assert not out.exists()


def test_scoring_a_batch_that_repeats_a_held_paste_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One traceback posted in two trackers is one incident, whatever the thread."""
    held, out = tmp_path / "held", tmp_path / "out"
    held.mkdir()
    paste = (
        "\n".join(f'  File "train.py", line {n}, in step' for n in range(6))
        + "\nRuntimeError: CUDA error: no kernel image"
    )

    def record(rid: str, source: str) -> str:
        return json.dumps({"id": rid, "label": "cuda-driver-mismatch", "log": paste, "source": source})

    (held / "collected-old.jsonl").write_text(record("apex-1261", "https://github.com/nvidia/apex/issues/1261") + "\n")
    batch = tmp_path / "collected-new.jsonl"
    batch.write_text(record("clipbert-40", "https://github.com/jayleicn/clipbert/issues/40") + "\n")
    script = _prequential_script()
    with pytest.raises(SystemExit) as exc:
        script.main([str(batch), "--held", str(held), "--out-dir", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "1 incident(s) whose log another thread holds word for word: 'clipbert-40' (the log of 'apex-1261')" in err
    assert not out.exists()
