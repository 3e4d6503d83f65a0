"""A new user's first hour (issue 17): what they type works as the README and docs say.

Console-script and subprocess tests: a plain script without a ``__main__`` guard, the
``denpex-ml`` executable, ``python -m denpex_ml``; notebook reprs of a diagnosis.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from denpex_ml.cli import main
from denpex_ml.cli.console import EXIT_OK, EXIT_USAGE
from denpex_ml.model.core import DenpexModel
from denpex_ml.model.diagnosis import Alternative, Diagnosis, Evidence
from denpex_ml.taxonomy import load_taxonomy

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "data" / "examples" / "jobs"
CLI = shutil.which("denpex-ml", path=str(Path(sys.executable).parent)) or "denpex-ml"


def _run(args: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


# -- item 1: score_archive(workers=2) from a plain script and from a notebook-like __main__ ------
_SCRIPT = """
from denpex_ml import score_archive

rows = []
for row in score_archive({jobs!r}, model={model!r}, workers=2):
    rows.append((row.job_id, row.label, row.error))
print("ROWS", len(rows), "ERRORS", sum(1 for r in rows if r[2]))
"""


def test_score_archive_with_workers_in_a_plain_unguarded_script(tiny_model_dir: Path, tmp_path: Path) -> None:
    code = _SCRIPT.format(jobs=str(EXAMPLES), model=str(tiny_model_dir))
    script = tmp_path / "score_my_jobs.py"  # no `if __name__ == "__main__":`, as pasted from the README
    script.write_text(code)
    proc = _run([sys.executable, str(script)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    n_jobs = len([p for p in EXAMPLES.iterdir() if not p.name.startswith(".")])
    assert f"ROWS {n_jobs} ERRORS 0" in proc.stdout
    assert proc.stdout.count("ROWS") == 1  # the workers did not run the script again
    # a notebook's __main__ has no file: the same loop given as `python -c` code
    proc = _run([sys.executable, "-c", code], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"ROWS {n_jobs} ERRORS 0" in proc.stdout


# -- item 4: the command line, through the console script --------------------------------------
def test_console_script_verbosity_and_usage(tmp_path: Path) -> None:
    quiet = _run([CLI, "taxonomy", "list"], cwd=tmp_path)
    assert quiet.returncode == EXIT_OK and "INFO" not in quiet.stderr
    for argv in ([CLI, "-v", "taxonomy", "list"], [CLI, "taxonomy", "list", "-v"]):  # before or after
        proc = _run(argv, cwd=tmp_path)
        assert proc.returncode == EXIT_OK and "INFO denpex_ml" in proc.stderr, proc.stderr
    bad = _run([CLI, "taxonomy", "list", "--bogus"], cwd=tmp_path)
    assert bad.returncode == EXIT_USAGE
    assert "usage: denpex-ml taxonomy list" in bad.stderr and "--bogus" in bad.stderr
    mod = _run([sys.executable, "-m", "denpex_ml", "--version"], cwd=tmp_path)
    assert mod.returncode == EXIT_OK and mod.stdout.startswith("denpex-ml ")


def test_bad_flags_show_the_subcommand_usage_and_bad_suffixes_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["classify", "--bogus", "x.log"]) == EXIT_USAGE
    assert "usage: denpex-ml classify" in capsys.readouterr().err
    assert main(["incidents", "list", "--nope"]) == EXIT_USAGE
    assert "usage: denpex-ml incidents list" in capsys.readouterr().err
    assert main(["score", str(EXAMPLES), "-o", str(tmp_path / "out.txt"), "-q"]) == EXIT_USAGE
    assert "out.txt" in capsys.readouterr().err
    assert main(["-q", "taxonomy", "list", "-v"]) == EXIT_OK  # -q/-v accepted on both sides


# -- item 5: classify on an archive of several jobs ---------------------------------------------
def test_classify_on_an_archive_of_several_jobs_warns_and_points_to_score(
    tiny_model_dir: Path, tiny_model: DenpexModel, tmp_path: Path
) -> None:
    archive = tmp_path / "jobs.tar.gz"
    assert main(["synth", "--per-class", "1", "--label", "cuda-oom", "--label", "host-oom", "--out", str(archive)]) == 0
    d = tiny_model.classify(archive)
    (warning,) = [w for w in d.stats["warnings"] if "several jobs" in w]
    assert "denpex-ml score" in warning and "jobs.tar.gz" in warning
    proc = _run([CLI, "classify", str(archive), "--model", str(tiny_model_dir)], cwd=tmp_path)
    assert proc.returncode == EXIT_OK and "several jobs" in proc.stderr and "denpex-ml score" in proc.stderr
    one = tiny_model.classify(EXAMPLES / "cuda-oom")  # one job: no such warning
    assert not [w for w in one.stats["warnings"] if "several jobs" in w]


# -- item 6: reading a Diagnosis -----------------------------------------------------------------
def _unknown() -> Diagnosis:
    tax = load_taxonomy()
    return Diagnosis(
        label="unknown",
        confidence=0.6,
        alternatives=[("cuda-oom", 0.4), ("host-oom", 0.2), ("nccl-network-error", 0.1), ("missing-module", 0.001)],
        initiating_rank=None,
        entry=tax.get("unknown"),
        evidence=[Evidence(2, "2", "job.log", 7, "<script>alert('x')</script> & RuntimeError", "error line")],
        best_guess="cuda-oom",
    )


def test_diagnosis_str_is_the_summary_and_repr_is_short(tiny_model: DenpexModel) -> None:
    d = tiny_model.classify(EXAMPLES / "cuda-oom")
    assert str(d) == d.summary() and "Fix:" in str(d)
    assert len(repr(d)) < 300 and repr(d).startswith("Diagnosis(label=")
    assert "Evidence" not in repr(d)
    assert isinstance(d.alternatives[0], Alternative)
    first = d.alternatives[0]
    label, p = first  # a tuple ...
    assert first["label"] == label and first["probability"] == p  # ... read like a batch row's dicts
    assert [a.to_dict() for a in d.alternatives] == d.to_dict()["alternatives"]
    assert "0%" not in str(d).splitlines()[2] or "Also possible" not in str(d).splitlines()[2]


def test_unknown_diagnosis_text_is_consistent_and_drops_zero_alternatives() -> None:
    d = _unknown()
    text = str(d)
    assert "confidence 60%" not in text  # not shown beside the entries' own probabilities
    assert "the closest, cuda-oom, has 40%" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("Closest entries:"))
    # one distribution: the entries shown sum to at most 100%; "missing-module 0%" is left out
    assert line == "Closest entries: cuda-oom 40%, host-oom 20%, nccl-network-error 10%"
    assert abs(d.confidence - (1 - d.alternatives[0].probability)) < 1e-9


def test_diagnosis_html_for_notebooks_escapes_all_text() -> None:
    page = _unknown()._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp;" in page
    assert page.startswith('<div class="denpex-diagnosis">') and "Root cause" in page


def test_classify_json_alternatives_have_the_batch_row_shape(
    tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["classify", str(EXAMPLES / "cuda-oom"), "--model", str(tiny_model_dir), "--json"]) == EXIT_OK
    alts = json.loads(capsys.readouterr().out)["alternatives"]
    assert alts and set(alts[0]) == {"label", "probability"}


def test_docs_first_hour_exists_and_names_each_step() -> None:
    text = (REPO / "docs" / "first-hour.md").read_text(encoding="utf-8")
    for step in ("pip install", "denpex-ml classify", "denpex-ml score", "pandas", "incidents add", "retrain"):
        assert step in text, step
    assert "mlflow-log" in text and textwrap.dedent(text).count("```") % 2 == 0
