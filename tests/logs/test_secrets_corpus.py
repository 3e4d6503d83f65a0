"""No planted secret reaches any output the library writes.

The corpus (``tests/fixtures/secrets/corpus.py``) plants more than 40 kinds of secrets and
personal data in every position a log offers (env dumps, flags with ``=`` and with a space,
tracebacks, NCCL lines, pdsh prefixes, after a carriage return, file and directory names).
Each test reads one family of outputs and fails naming every (output, kind) pair that leaked.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import denpex_ml.cli.app
from denpex_ml.batch import score_archive
from denpex_ml.cli import incidents, main
from denpex_ml.cli.console import EXIT_OK
from denpex_ml.errors import ModelError
from denpex_ml.incidents import IncidentStore
from denpex_ml.logs import read_logs
from denpex_ml.model.core import DenpexModel, load_model


def _load_corpus() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "fixtures" / "secrets" / "corpus.py"
    spec = importlib.util.spec_from_file_location("denpex_secrets_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus()
SECRETS: dict[str, str] = corpus.values()


def _leaks(outputs: dict[str, str]) -> list[str]:
    return [
        f"{where}: {kind} ({value!r})"
        for where, text in outputs.items()
        for kind, value in SECRETS.items()
        if value in text
    ]


def _tree_text(root: Path) -> str:
    """Every file name and every file's text under ``root`` (what a store or run left on disk)."""
    parts = []
    for p in sorted(root.rglob("*")):
        parts.append(str(p.relative_to(root)))
        if p.is_file():
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def scoring_model(request: pytest.FixtureRequest) -> tuple[DenpexModel, list[str]]:
    """The shipped model (its static encoder loads in seconds) and the CLI arguments naming it;
    the suite's tiny model when the shipped one cannot be loaded (its taxonomy changed)."""
    try:
        return load_model(), []
    except ModelError:
        model: DenpexModel = request.getfixturevalue("tiny_model")
        return model, ["--model", str(request.getfixturevalue("tiny_model_dir"))]


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    return corpus.write_job(tmp_path / "job")


def test_the_corpus_is_broad() -> None:
    assert len(corpus.PLANTED) >= 40
    assert len(set(SECRETS.values())) == len(SECRETS)


def test_ingest_outputs(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = read_logs(job)
    outputs = {
        "read_logs.text": bundle.text(),
        "read_logs.summary": json.dumps(bundle.summary()),
        "read_logs.sources": "\n".join(bundle.sources),
        "read_logs.warnings": "\n".join(bundle.warnings),
        "read_logs.streams": " ".join(map(str, bundle.streams)),
    }
    for argv in (["ingest", str(job), "--json"], ["ingest", str(job)]):
        assert main(argv) == EXIT_OK
        captured = capsys.readouterr()
        outputs[" ".join(argv[:1] + argv[2:])] = captured.out + captured.err
    assert _leaks(outputs) == []
    kept = bundle.text()
    assert "<masked:private-key>" in kept and "<masked:secret>" in kept and "<masked:token>" in kept
    for evidence in corpus.EVIDENCE:  # masking keeps what a diagnosis needs
        assert evidence in kept, evidence


def test_classify_outputs(job: Path, scoring_model: tuple[DenpexModel, list[str]]) -> None:
    d = scoring_model[0].classify(job)
    outputs = {"classify.summary": d.summary(), "classify.to_dict": json.dumps(d.to_dict())}
    assert _leaks(outputs) == []


def _score(
    root: Path, scoring_model: tuple[DenpexModel, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[list[str], dict[str, str]]:
    """Score ``root`` through the API and the CLI (JSONL and CSV); job ids and every output."""
    model, model_args = scoring_model
    rows = list(score_archive(root, model=model))
    assert len(rows) == 3 and any(r.error for r in rows)  # the unreadable job is an error row
    outputs = {f"row {r.job_id}": json.dumps(r.to_dict()) for r in rows}
    for fmt in ("jsonl", "csv"):
        out = tmp_path / "results" / f"out.{fmt}"
        out.parent.mkdir(exist_ok=True)
        assert main(["score", str(root), "-o", str(out), "--quiet", *model_args]) == 1  # 1: an error row
        captured = capsys.readouterr()
        outputs[f"score -o .{fmt}"] = out.read_text(encoding="utf-8") + captured.out + captured.err
    outputs["results dir"] = _tree_text(tmp_path / "results")
    return [r.job_id for r in rows], outputs


def test_batch_rows_and_result_files(
    tmp_path: Path, scoring_model: tuple[DenpexModel, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    job_ids, outputs = _score(corpus.write_batch(tmp_path / "jobs"), scoring_model, tmp_path, capsys)
    # job ids are checked by the test below; every other field, message and file must be clean
    for job_id in sorted(job_ids, key=len, reverse=True):
        outputs = {k: v.replace(job_id, "<job-id>") for k, v in outputs.items()}
    assert _leaks(outputs) == []


def test_batch_job_ids_are_masked(
    tmp_path: Path, scoring_model: tuple[DenpexModel, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    job_ids, _ = _score(corpus.write_batch(tmp_path / "jobs"), scoring_model, tmp_path, capsys)
    assert _leaks({"job_id": "\n".join(job_ids)}) == []


def _host_kinds() -> set[str]:
    """Host names and addresses: what the owner's host map may hold (nothing else)."""
    return {k for k in SECRETS if k.startswith("host-") or "ipv4" in k or "ipv6" in k}


def test_node_attribution_reveals_hosts_only_when_asked(
    job: Path, tmp_path: Path, scoring_model: tuple[DenpexModel, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Topology, suspects and kernel lines hold pseudonyms; real host names come out only through
    ``reveal_hosts`` / ``--reveal-hosts`` / ``--host-map``, and the map file is private (0600)."""
    model, model_args = scoring_model
    bundle = read_logs(job)
    d = model.classify(job)
    assert d.suspects  # the Xid 79 in the kernel log is attributed
    outputs = {
        "bundle.system": "\n".join(map(repr, bundle.system)),
        "bundle.job_hosts": json.dumps(bundle.job_hosts),
        "classify.topology+suspects": json.dumps(d.to_dict()),
        "classify.summary": d.summary(),
    }
    assert main(["classify", str(job), "--json", *model_args]) == EXIT_OK
    outputs["classify --json"] = capsys.readouterr().out
    assert _leaks(outputs) == []
    # asked: every real host name is in the owner's map, and nowhere else is anything else leaked
    shown = model.classify(job, reveal_hosts=True)
    revealed = {kind for kind, value in SECRETS.items() if value in json.dumps(shown.to_dict())}
    assert revealed and revealed <= _host_kinds()
    host_map = tmp_path / "map.json"
    assert main(["classify", str(job), "--host-map", str(host_map), *model_args]) == EXIT_OK
    assert _leaks({"classify --host-map (stdout)": capsys.readouterr().out}) == []
    assert oct(host_map.stat().st_mode & 0o777) == "0o600"
    assert {SECRETS[k] for k in ("host-kernel-dir", "host-journal", "host-nodelist")} <= set(
        json.loads(host_map.read_text()).values()
    )


def test_node_summary_files(
    tmp_path: Path, scoring_model: tuple[DenpexModel, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = corpus.write_batch(tmp_path / "jobs")
    _, model_args = scoring_model
    out, nodes = tmp_path / "results" / "out.jsonl", tmp_path / "results" / "nodes.csv"
    out.parent.mkdir()
    assert main(["score", str(root), "-o", str(out), "--nodes", str(nodes), "--quiet", *model_args]) == 1
    outputs = {"score --nodes": capsys.readouterr().out, "results dir": _tree_text(tmp_path / "results")}
    job_ids = [json.loads(line)["job_id"] for line in out.read_text().splitlines()]
    for job_id in sorted(job_ids, key=len, reverse=True):
        outputs = {k: v.replace(job_id, "<job-id>") for k, v in outputs.items()}
    assert _leaks(outputs) == [] and "host-" in nodes.read_text()
    assert not list(out.parent.glob("*.hosts.json"))
    # asked: the real names are only in the 0600 files
    argv = ["score", str(root), "-o", str(out), "--overwrite", "--nodes", str(nodes), "--reveal-hosts", "--quiet"]
    assert main([*argv, *model_args]) == 1
    capsys.readouterr()
    private = [nodes, out.parent / "nodes.csv.hosts.json"]
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in private)
    assert "hgx-rack4-n12" in private[1].read_text()
    shared = {str(p): p.read_text() for p in out.parent.iterdir() if p not in private}
    for job_id in sorted(job_ids, key=len, reverse=True):
        shared = {k: v.replace(job_id, "<job-id>") for k, v in shared.items()}
    assert _leaks(shared) == []


def test_incident_store(tmp_path: Path, job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = IncidentStore(tmp_path / "store")
    inc = store.add(job, label="unknown", source_url=f"https://tickets.example.org/9?by={corpus.EMAIL_DIR}")
    outputs = {"incidents.add": json.dumps(inc.to_dict()), "store on disk": _tree_text(store.path)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(denpex_ml.cli.app, "COMMANDS", {**denpex_ml.cli.app.COMMANDS, "incidents": incidents})
        assert (
            main(["incidents", "--store", str(tmp_path / "cli-store"), "add", str(job), "--label", "unknown"])
            == EXIT_OK
        )
        assert main(["incidents", "--store", str(tmp_path / "cli-store"), "list", "--json"]) == EXIT_OK
    captured = capsys.readouterr()
    outputs["incidents add/list (cli)"] = captured.out + captured.err + _tree_text(tmp_path / "cli-store")
    assert _leaks(outputs) == []


def _each_carrier() -> Iterator[tuple[str, str]]:
    for planted in corpus.PLANTED:
        for carrier in planted.carriers:
            if planted.value in carrier:
                yield planted.kind, carrier


@pytest.mark.parametrize(("kind", "carrier"), list(_each_carrier()))
def test_each_carrier_alone_is_masked_on_every_line_shape(kind: str, carrier: str) -> None:
    """One secret per job, so no other line can teach the masker what it needs (hosts aside)."""
    value = SECRETS[kind]
    prefixes = ("", "[rank0]: ", "[rank1]: RuntimeError: ", " 10%|#   | 1/10\r", "node-7:99:99 [0] NCCL INFO ")
    lines = [corpus.plant(prefix, carrier) for prefix in prefixes]
    if kind.startswith("host-") and kind not in ("host-fqdn",):
        lines.insert(0, f"MASTER_ADDR={value}")  # a short name is only known from a structural position
    text = read_logs(text="\n".join(lines) + "\n").text()
    assert value not in text, text
