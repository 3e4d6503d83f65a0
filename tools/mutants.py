"""The project's lightweight mutation check: declared mutants of the security- and
decision-critical code, each expected to fail a named test selection.

Usage (from the repository root, with the project's virtual environment active)::

    python tools/mutants.py --list                 # the declared mutants
    python tools/mutants.py                        # run them all (minutes)
    python tools/mutants.py -k secret -k initiator # only mutants whose name contains a word
    python tools/mutants.py --worktree /tmp/mut    # reuse a worktree (created if missing)

Nothing in the checkout is touched: a detached ``git worktree`` of ``HEAD`` is made in a
temporary directory, the checkout's current ``tests/`` (and ``tools/``) are copied over it, so
uncommitted tests count, and each mutant is applied there, run, and reverted. ``--src`` also
copies the checkout's ``src/`` (otherwise the committed source is mutated). A mutant is

* **killed** when its test selection fails (pytest exit status 1),
* **survived** when the selection passes with the mutant in place,
* **stale** when its original snippet is not found exactly once (the code moved on: update
  the declaration),
* **error** for any other outcome (collection error, timeout, the unmutated selection failing).

The exit status is 0 when every selected mutant is killed, 1 otherwise. See
``docs/mutation-testing.md`` for the list's rationale and the triage of survivors.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    """One mutation: ``original`` (found exactly once in ``file``) becomes ``mutated``."""

    name: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]  # pytest arguments: paths, node ids, ``-k`` expressions
    what: str = ""


SECRETS = "src/denpex_ml/logs/secret_rules.py"
RULE_TESTS = ("tests/logs/test_secret_rules.py",)


def _drop_rule(name: str, original: str) -> Mutant:
    return Mutant(
        f"secret-rule-{name}-removed",
        SECRETS,
        original,
        "",
        RULE_TESTS,
        f"the {name} masking rule removed from DEFAULT_RULES",
    )


MUTANTS: tuple[Mutant, ...] = (
    # -- model persistence -----------------------------------------------------------------------
    Mutant(
        "persistence-allow-pickle",
        "src/denpex_ml/model/persistence.py",
        "np.load(head, allow_pickle=False)",
        "np.load(head, allow_pickle=True)",
        ("tests/model/test_model.py", "-k", "pickle"),
        "model arrays loaded with pickle allowed (the header check still refuses object arrays first)",
    ),
    Mutant(
        "persistence-object-arrays-accepted",
        "src/denpex_ml/model/persistence.py",
        "if dtype.hasobject:",
        "if False:",
        ("tests/model/test_model.py", "-k", "pickle"),
        "the .npy header check no longer refuses arrays of Python objects",
    ),
    # -- secret masking: one rule at a time ------------------------------------------------------
    Mutant(
        "secret-rule-private-key-removed",
        SECRETS,
        "data, _ = _mask_key_blocks(_encode(text))",
        "data = _encode(text)",
        RULE_TESTS,
        "private-key blocks no longer masked by mask_secrets",
    ),
    Mutant(
        "masker-private-key-removed",
        "src/denpex_ml/logs/masking.py",
        "data, n = _mask_key_blocks(data)",
        "n = 0",
        RULE_TESTS,
        "private-key blocks no longer masked by the per-job Masker (ingestion)",
    ),
    _drop_rule(
        "github-token",
        """    MaskRule(
        "github-token",
        r"\\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        "token",
        gate=r"gh[pousr]_|github_pat_",
    ),
""",
    ),
    _drop_rule(
        "aws-key-id",
        """    MaskRule(
        "aws-key-id",
        r"\\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\\b",
        "token",
        gate=r"AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA",
    ),
""",
    ),
    _drop_rule(
        "openai-like-key", '    MaskRule("openai-like-key", r"\\bsk-[A-Za-z0-9_-]{20,}", "token", gate=r"sk-"),\n'
    ),
    _drop_rule(
        "slack-token",
        """    MaskRule(
        "slack-token",
        r"\\bxox[abposre]-[A-Za-z0-9-]{10,}|\\bxapp-[0-9]-[A-Za-z0-9-]{10,}",
        "token",
        gate=r"xox[abposre]-|xapp-",
    ),
""",
    ),
    _drop_rule(
        "jwt",
        '    MaskRule("jwt", r"\\beyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}\\.?[A-Za-z0-9_-]*", "token", gate=r"eyJ"),\n',
    ),
    _drop_rule("bearer", '    MaskRule("bearer", r"(?i)\\b(?:bearer|basic)[ \\t]+", "token", edit=_bearer_edit),\n'),
    _drop_rule(
        "url-credentials",
        """    MaskRule(
        "url-credentials",
        r"\\b(?i:[a-z][a-z0-9+.-]*)://[^\\s/@:]+:[^\\s/@]+@|\\b(?i:https?)://[^\\s/@:]+@",
        "secret",
        gate=r"://",
        edit=_url_edit,
    ),
""",
    ),
    _drop_rule(
        "windows-user",
        """    MaskRule(
        "windows-user",
        r"(?i)[a-z]:\\\\users\\\\[^\\\\\\s]+",
        "user",
        edit=lambda m, data: _user_edit(m, m.start() + 9),
    ),
""",
    ),
    # -- archive limits ----------------------------------------------------------------------------
    Mutant(
        "ingest-max-members-off",
        "src/denpex_ml/logs/metered.py",
        "if self.members > self.limits.max_members:",
        "if False:",
        ("tests/logs/test_archive_limits.py",),
        "IngestLimits.max_members / BatchLimits.max_members never enforced",
    ),
    Mutant(
        "ingest-max-depth-compression-off",
        "src/denpex_ml/logs/sources.py",
        "if stacked >= limits.max_depth:",
        "if False:",
        ("tests/logs/test_archive_limits.py",),
        "compression stacked deeper than max_depth accepted",
    ),
    Mutant(
        "ingest-max-depth-archives-off",
        "src/denpex_ml/logs/archives.py",
        "if level > limits.max_depth:",
        "if False:",
        ("tests/logs/test_archive_limits.py",),
        "archives nested deeper than max_depth accepted (tar and zip)",
    ),
    Mutant(
        "ingest-max-depth-tar-off",
        "src/denpex_ml/logs/archives.py",
        '''    Raises the first refused member (see the module doc); folders are passed over.
    """
    _depth_check(name, level, limits)''',
        '''    Raises the first refused member (see the module doc); folders are passed over.
    """''',
        ("tests/logs/test_archive_limits.py",),
        "the depth check of tar archives removed",
    ),
    Mutant(
        "ingest-max-depth-zip-off",
        "src/denpex_ml/logs/archives.py",
        '''    raises the first refused member (see the module doc).
    """
    _depth_check(name, level, limits)''',
        '''    raises the first refused member (see the module doc).
    """''',
        ("tests/logs/test_archive_limits.py",),
        "the depth check of zip archives removed",
    ),
    Mutant(
        "batch-max-members-not-passed",
        "src/denpex_ml/batch/jobs.py",
        "            max_members=self.max_members,\n",
        "",
        ("tests/logs/test_archive_limits.py",),
        "BatchLimits.max_members not passed on to the archive reader",
    ),
    # -- promotion gate ----------------------------------------------------------------------------
    Mutant(
        "gate-real-cv-comparison-off",
        "src/denpex_ml/training/promotion.py",
        "        base_cfg.real_data\n        and base_cfg.real_data == cand_cfg.real_data",
        "        False\n        and base_cfg.real_data == cand_cfg.real_data",
        ("tests/training/test_retrain.py", "-k", "gate_compares or gate_scores"),
        "the real-incident (grouped CV) comparison of the promotion gate skipped",
    ),
    Mutant(
        "gate-holdout-off",
        "src/denpex_ml/training/promotion.py",
        "    if holdout:\n        _holdout(report, pair, holdout)",
        "    if False:\n        _holdout(report, pair, holdout)",
        ("tests/training/test_retrain.py", "-k", "gate_compares or gate_scores"),
        "the --holdout block of the promotion gate skipped",
    ),
    Mutant(
        "eval-gate-tfidf-check-off",
        "src/denpex_ml/evaluation/gate.py",
        "and not model_full > tfidf_full:",
        "and False:",
        ("tests/evaluation/test_gate.py", "-k", "check_gate"),
        "check_gate no longer fails a model that does not beat TF-IDF",
    ),
    Mutant(
        "eval-gate-rule-check-off",
        "src/denpex_ml/evaluation/gate.py",
        "if rule is not None and not f1 > rule:",
        "if False:",
        ("tests/evaluation/test_gate.py", "-k", "check_gate"),
        "check_gate no longer fails a model that does not beat the rule baseline",
    ),
    # -- decision ----------------------------------------------------------------------------------
    Mutant(
        "decide-unknown-confidence-p-best",
        "src/denpex_ml/model/core.py",
        "        return UNKNOWN_ID, 1.0 - p_best, best\n\n    #: What a Flight Recorder finding",
        "        return UNKNOWN_ID, p_best, best\n\n    #: What a Flight Recorder finding",
        ("tests/model/test_decision.py",),
        "unknown's confidence p(best) instead of 1 - p(best) (below the abstention threshold)",
    ),
    Mutant(
        "decide-no-evidence-unknown-confidence-p-best",
        "src/denpex_ml/model/core.py",
        "            return UNKNOWN_ID, 1.0 - p_best, best\n        if p_best >= self.abstain_threshold:",
        "            return UNKNOWN_ID, p_best, best\n        if p_best >= self.abstain_threshold:",
        ("tests/model/test_decision.py",),
        "unknown's confidence p(best) instead of 1 - p(best) (no evidence)",
    ),
    Mutant(
        "decide-no-evidence-abstention-dropped",
        "src/denpex_ml/model/core.py",
        "            return UNKNOWN_ID, 1.0 - p_best, best\n        if p_best >= self.abstain_threshold:",
        "        if p_best >= self.abstain_threshold:",
        ("tests/model/test_decision.py",),
        "a log without failure evidence (and a model without a no-failure class) answered with the best failure class",
    ),
    Mutant(
        "decide-no-evidence-no-failure-dropped",
        "src/denpex_ml/model/core.py",
        "            if no_fail is not None:  # nothing in the log shows a failure: none found\n"
        "                return NO_FAILURE_ID, 1.0 - p_best if best != NO_FAILURE_ID else p_best, best\n",
        "",
        ("tests/model/test_decision.py",),
        "a log without failure evidence that the model is not sure of answered unknown instead of no-failure",
    ),
    Mutant(
        "decide-family-rule-dropped",
        "src/denpex_ml/model/core.py",
        "if family_supported(proba[None, :], self.labels, self.family_threshold)[0]:",
        "if False:",
        ("tests/model/test_decision.py",),
        "a hang below the threshold whose family is likely becomes unknown",
    ),
    # -- initiator ---------------------------------------------------------------------------------
    Mutant(
        "initiator-earliest-timestamp-reversed",
        "src/denpex_ml/model/initiator.py",
        "top = [min(timed, key=lambda r: first_ts[r])]",
        "top = [max(timed, key=lambda r: first_ts[r])]",
        ("tests/model/test_initiator.py",),
        "ties broken by the latest timestamp",
    ),
    Mutant(
        "initiator-silent-rank-off",
        "src/denpex_ml/model/initiator.py",
        "        if len(silent) == 1:\n",
        "        if False:\n",
        ("tests/model/test_initiator.py",),
        "the one rank silent while every other timed out is not named",
    ),
    Mutant(
        "initiator-seqnum-behind-off",
        "src/denpex_ml/model/initiator.py",
        "            if len(behind) < len(coll) / 2:",
        "            if False:",
        ("tests/model/test_initiator.py",),
        "the rank whose last collective is behind is not named",
    ),
    Mutant(
        "initiator-mpirun-noticed-off",
        "src/denpex_ml/model/rank_clues.py",
        '        if "noticed that process rank" in text or "has exited due to process rank" in text:',
        "        if False:",
        ("tests/model/test_initiator.py",),
        "mpirun's 'process rank N ... exited on signal' no longer names rank N",
    ),
    Mutant(
        "suspects-call-site-majority-off",
        "src/denpex_ml/hang/suspects.py",
        "    if n_common > len(odd) and len(odd) <= max(1, len(f.call_sites) // 2):",
        "    if len(odd) <= len(f.call_sites):",
        ("tests/hang/test_suspects.py",),
        "ranks split two against two at different call sites are blamed anyway",
    ),
    Mutant(
        "suspects-missing-dumps-first",
        "src/denpex_ml/hang/suspects.py",
        '    if not f.flight_recorder_blamed or f.flight_recorder_kind == "missing-dump":\n        return None\n    return _fr_blame(f)',
        "    if not f.flight_recorder_blamed:\n        return None\n    return _fr_blame(f)",
        ("tests/hang/test_suspects.py",),
        "ranks that only wrote no Flight Recorder dump outrank where the program diverged",
    ),
    Mutant(
        "hang-odd-value-quorum-two",
        "src/denpex_ml/hang/scan.py",
        "_ODD_VALUE_QUORUM = 3\n",
        "_ODD_VALUE_QUORUM = 1\n",
        ("tests/hang/test_analysis.py",),
        "a rank is called odd when as few as one other rank agrees (two against two, or three ranks)",
    ),
    Mutant(
        "hang-live-stack-beside-exception",
        "src/denpex_ml/hang/analysis.py",
        "    if not structure.exception_ranks and any(f.stack_dumped for f in scan.facts.values()):",
        "    if any(f.stack_dumped for f in scan.facts.values()):",
        ("tests/hang/test_analysis.py",),
        "a live stack dump beside a raised exception is taken for a hang",
    ),
    Mutant(
        "same-gpu-ignores-pid",
        "src/denpex_ml/features/same_gpu.py",
        '        pid = first.setdefault(key, m.group("pid"))',
        '        pid = first.setdefault(key, "")',
        ("tests/features/test_same_gpu.py",),
        "one process's several communicators on one GPU are taken for two ranks on it",
    ),
    Mutant(
        "rank-process-failure-exit-code-ignored",
        "src/denpex_ml/model/rank_clues.py",
        r'    r"|\bProcessFailure\(local_rank=(?P<h>\d+), pid=\d+, exitcode=-?[1-9]"',
        r'    r"|\bProcessFailure\(local_rank=(?P<h>\d+), pid=\d+, exitcode=-?\d"',
        ("tests/model/test_initiator.py",),
        "a worker torchelastic records as exited cleanly is named as the one that failed",
    ),
    Mutant(
        "rank-paddle-launcher-unread",
        "src/denpex_ml/model/rank_clues.py",
        '        if "noticed that process rank" in text or "due to process rank" in text or "process with rank=[" in text:',
        '        if "noticed that process rank" in text or "due to process rank" in text:',
        ("tests/model/test_initiator.py",),
        "the trainer paddle.distributed.launch names as aborted is not read",
    ),
    Mutant(
        "structure-words-without-failure-gate",
        "src/denpex_ml/features/structure.py",
        "            if _VOCAB_SCREEN.search(text) and _FAILING.search(text):",
        "            if _VOCAB_SCREEN.search(text):",
        ("tests/features/test_structure.py",),
        "start-up and memory words on lines that report nothing wrong count as failure evidence",
    ),
    Mutant(
        "rank-msmpi-report-unread",
        "src/denpex_ml/model/rank_clues.py",
        '        if text.startswith("job aborted:"):',
        '        if text.startswith("never a line"):',
        ("tests/model/test_initiator.py",),
        "MS-MPI's abort report is not read: the failed process goes unnamed",
    ),
    Mutant(
        "rank-named-by-any-line",
        "src/denpex_ml/model/rank_clues.py",
        '        if "ank" in text and is_error_line(text):',
        '        if "ank" in text:',
        ("tests/model/test_initiator.py",),
        "a line that reports no error names the failing rank",
    ),
    Mutant(
        "error-line-words-of-other-stacks-dropped",
        "src/denpex_ml/features/select.py",
        '''    r"\\b(?:cuda|CUDA|cuDNN|CUDNN|cublas|CUBLAS|hip|HIP)(?: runtime)? error\\b|\\bFAIL\\b|\\b[Oo]ut of memory\\b|"''',
        '''    r"\\bNEVER_AN_ERROR_WORD\\b|"''',
        ("tests/features/test_select.py",),
        "Lua Torch's FAIL, a cuda runtime error and an out-of-memory line are no error lines",
    ),
    Mutant(
        "glog-error-level-not-salient",
        "src/denpex_ml/logs/patterns.py",
        '''    r"retry count exceeded|GID is NULL|已杀死|\\blua(?:jit)?: |stack traceback:|\\b" + GLOG_ERROR''',
        '''    r"retry count exceeded|GID is NULL|已杀死|\\blua(?:jit)?: |stack traceback:"''',
        ("tests/logs/test_formats.py",),
        "glog ERROR and FATAL lines in the middle of a long log are dropped",
    ),
    Mutant(
        "hang-odd-value-clock-times",
        "src/denpex_ml/hang/scan.py",
        '            parts = _INT.split(_CLOCK.sub("<t>", text) if ":" in text or "-" in text else text)',
        "            parts = _INT.split(text)",
        ("tests/hang/test_analysis.py",),
        "a rank whose log line is a second later is called odd",
    ),
    Mutant(
        "hang-native-stacks-without-wait-guard",
        "src/denpex_ml/hang/scan.py",
        '            if not any(_NATIVE_WAIT_TOP.match(t) for t in frame_lines if "#0 " in t):',
        "            if False:",
        ("tests/hang/test_analysis.py",),
        "a core dump's native stacks (top frame the crash site) are read as a waiting process's",
    ),
    Mutant(
        "training-split-cache-ignores-taxonomy",
        "src/denpex_ml/training/cache.py",
        "    h.update(taxonomy.to_json().encode())\n",
        "",
        ("tests/training/test_split_cache.py",),
        "cached synthetic splits reused after the taxonomy changed",
    ),
    Mutant(
        "embedding-store-rewritten-when-unchanged",
        "src/denpex_ml/training/cache.py",
        "        if self._in_file is not None and encoder.inserted == self._in_file and self.path.exists():\n            return\n",
        "",
        ("tests/training/test_embedding_store.py",),
        "the template-embedding file rewritten on every retrain although nothing new was embedded",
    ),
    Mutant(
        "embedding-store-trusts-a-prefilled-encoder",
        "src/denpex_ml/training/cache.py",
        "self._in_file = encoder.inserted if before == 0 and current else None",
        "self._in_file = encoder.inserted if current else None",
        ("tests/training/test_embedding_store.py",),
        "templates cached before the file was read are never written",
    ),
    Mutant(
        "retrieval-votes-ignore-similarity",
        "src/denpex_ml/model/retrieval.py",
        "weight = np.where(np.isfinite(s), np.maximum(s, 0.0), 0.0).astype(np.float32)",
        "weight = np.where(np.isfinite(s), 1.0, 0.0).astype(np.float32)",
        ("tests/model/test_retrieval.py",),
        "top-k votes counted, not weighted by similarity",
    ),
    Mutant(
        "hang-end-of-sequence-is-a-hang",
        "src/denpex_ml/hang/scan.py",
        'r"BaseCollectiveExecutor::StartAbort (?!Out of range)|Aborting Ring\\w+ with |"',
        'r"BaseCollectiveExecutor::StartAbort|Aborting Ring\\w+ with |"',
        ("tests/hang/test_analysis.py",),
        "Keras' end-of-epoch StartAbort warning taken for a collective abort again (three healthy logs read as hangs)",
    ),
    Mutant(
        "plain-file-counter-bypassed",
        "src/denpex_ml/logs/sources.py",
        "return _buffered(_Counting(_open_file(path, buffering=0), budget, gauge=_Gauge(rel)))",
        "return _open_file(path)",
        ("tests/logs/test_sources.py", "tests/logs/test_hardening_ingest.py"),
        "a plain file read without charging its bytes to the read budget (max_total_bytes unenforced)",
    ),
    # -- featurisation -----------------------------------------------------------------------------
    Mutant(
        "featurize-max-lines-cap-off",
        "src/denpex_ml/model/featurize.py",
        "selected = select_lines(bundle, hits, max_lines=self.max_lines, benign=self.matcher.is_benign)",
        "selected = select_lines(bundle, hits, max_lines=10**9, benign=self.matcher.is_benign)",
        ("tests/model/test_featurize.py",),
        "the 96-line embedding cap removed",
    ),
    # -- synthetic archives ------------------------------------------------------------------------
    Mutant(
        "synthetic-tar-member-truncated",
        "src/denpex_ml/synthetic/writers.py",
        '                    data = text.encode("utf-8")\n',
        '                    data = text.encode("utf-8")[:-1]\n',
        ("tests/test_synthetic_roundtrip.py", "-k", "archive"),
        "write_archive (.tar.gz) drops each file's last byte",
    ),
    Mutant(
        "synthetic-zip-member-empty",
        "src/denpex_ml/synthetic/writers.py",
        'zf.writestr(f"{base}/{rel}", text.encode("utf-8"))',
        'zf.writestr(f"{base}/{rel}", b"")',
        ("tests/test_synthetic_roundtrip.py", "-k", "archive"),
        "write_archive (.zip) writes empty files",
    ),
    # -- retraining ---------------------------------------------------------------------------------
    Mutant(
        "stage1-carry-fingerprints-by-index",
        "src/denpex_ml/model/head.py",
        "            cols[c * fp : (c + 1) * fp] = np.arange(b * fp, (b + 1) * fp)\n",
        "            cols[c * fp : (c + 1) * fp] = np.arange(c * fp, (c + 1) * fp) % layout.n_fingerprint\n",
        ("tests/model/test_head.py", "-k", "carried"),
        "a class's fingerprint columns carried by position, not by the class's id",
    ),
    Mutant(
        "stage1-new-class-gets-a-known-row",
        "src/denpex_ml/model/head.py",
        "                raw[np.flatnonzero(known)] = given\n",
        "                raw[: len(given)] = given\n",
        ("tests/model/test_head.py", "-k", "carried"),
        "the carried-over rows written over the first classes, the new class among them",
    ),
    Mutant(
        "retrieval-block-drops-exclusion",
        "src/denpex_ml/model/retrieval.py",
        "exclude=None if exclude is None else exclude[i : i + QUERY_BLOCK]",
        "exclude=None",
        ("tests/model/test_retrieval.py",),
        "query blocks scored without their rows' exclusions",
    ),
    Mutant(
        "feature-cache-text-ends-unchecked",
        "src/denpex_ml/training/cache.py",
        "int(ends[-1]) != len(blob)",
        "False",
        ("tests/training/test_feature_store.py",),
        "text ends that do not fit the texts accepted",
    ),
    # -- CLI ---------------------------------------------------------------------------------------
    Mutant(
        "cli-incidents-unregistered",
        "src/denpex_ml/cli/app.py",
        '    "incidents": incidents,\n',
        "",
        ("tests/test_cli.py", "-k", "help or incidents"),
        "the incidents command missing from the CLI",
    ),
)


@dataclass
class Outcome:
    name: str
    status: str  # killed | survived | stale | error
    seconds: float
    detail: str = ""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout


def _copy_tree(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))


@contextmanager
def worktree(path: str | None, *, copy_src: bool) -> Iterator[Path]:
    """A detached worktree of HEAD with the checkout's tests (and optionally src) copied in."""
    made = False
    wt = Path(tempfile.mkdtemp(prefix="denpex-mutants-")) / "wt" if path is None else Path(path)
    if not (wt / ".git").exists():
        _git("worktree", "add", "--detach", str(wt), "HEAD")
        made = True
    try:
        for part in ("tests", "tools") + (("src",) if copy_src else ()):
            _copy_tree(REPO / part, wt / part)
        yield wt
    finally:
        if made and path is None:
            _git("worktree", "remove", "--force", str(wt))
            shutil.rmtree(wt.parent, ignore_errors=True)


def _pytest(wt: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(wt / "src"), HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    try:
        proc = subprocess.run(cmd, cwd=wt, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timeout"
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1:] or [proc.stderr.strip()[-200:]]
    return proc.returncode, tail[0]


def run_mutant(wt: Path, m: Mutant, timeout: float) -> Outcome:
    path = wt / m.file
    t0 = time.perf_counter()
    text = path.read_text(encoding="utf-8")
    n = text.count(m.original)
    if n != 1:
        return Outcome(m.name, "stale", 0.0, f"original snippet found {n} times in {m.file}")
    path.write_text(text.replace(m.original, m.mutated), encoding="utf-8")
    try:
        rc, tail = _pytest(wt, m.tests, timeout)
    finally:
        path.write_text(text, encoding="utf-8")
    status = {0: "survived", 1: "killed"}.get(rc, "error")
    return Outcome(m.name, status, time.perf_counter() - t0, f"rc={rc}: {tail}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-k", action="append", default=[], metavar="WORD", help="only mutants whose name contains WORD")
    ap.add_argument("--list", action="store_true", help="list the declared mutants and exit")
    ap.add_argument("--worktree", metavar="DIR", help="use (or create and keep) this worktree")
    ap.add_argument("--src", action="store_true", help="copy the checkout's src/ too (default: HEAD's)")
    ap.add_argument("--no-baseline", action="store_true", help="skip running each selection unmutated first")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per pytest run (default 900)")
    ap.add_argument("--json", metavar="FILE", help="also write the outcomes as JSON")
    ap.add_argument(
        "--tests", metavar="ARGS", help="run this pytest selection (one string) instead of each mutant's own (triage)"
    )
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.k or any(w in m.name for w in args.k)]
    if args.tests:
        chosen = [replace(m, tests=tuple(shlex.split(args.tests))) for m in chosen]
    if args.list:
        for m in chosen:
            print(f"{m.name:48} {m.file}\n{'':48} {m.what}\n{'':48} tests: {' '.join(m.tests)}")
        return 0
    outcomes: list[Outcome] = []
    with worktree(args.worktree, copy_src=args.src) as wt:
        broken: dict[tuple[str, ...], str] = {}
        if not args.no_baseline:
            for sel in dict.fromkeys(m.tests for m in chosen):
                rc, tail = _pytest(wt, sel, args.timeout)
                if rc != 0:
                    broken[sel] = f"unmutated selection fails (rc={rc}: {tail})"
        for m in chosen:
            if m.tests in broken:
                out = Outcome(m.name, "error", 0.0, broken[m.tests])
            else:
                out = run_mutant(wt, m, args.timeout)
            outcomes.append(out)
            print(f"{out.status:9} {out.name:48} {out.seconds:6.1f}s  {out.detail}", flush=True)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "stale", "error")}
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n", encoding="utf-8")
    return 0 if counts["killed"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
