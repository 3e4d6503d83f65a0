"""The floors of the house (docs/architecture.md), checked on the source: a lower package never
imports a higher one, no two packages import each other, and the heavy optional libraries are
imported inside functions only (importing the library must not import mlflow or ray)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "denpex_ml"

#: package (first component under denpex_ml) -> the packages it may import besides itself
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_version": set(),
    "logs": {"errors"},
    "taxonomy": {"errors"},
    "embedding": {"errors"},
    "features": {"errors", "logs", "taxonomy"},
    "hang": {"errors", "features", "logs", "taxonomy"},
    "topology": {"errors", "logs", "taxonomy"},
    "model": {"_version", "embedding", "errors", "features", "hang", "logs", "taxonomy", "topology"},
}
#: the library core: what ``classify`` needs; none of it reaches the upper floors
CORE = set(ALLOWED)
UPPER = {"batch", "cli", "training", "evaluation", "synthetic", "report", "serve", "incidents", "dataset", "tracking"}
#: optional heavy libraries: imported inside functions, except in their own integration modules
HEAVY = {"mlflow", "ray", "datasets", "matplotlib"}
INTEGRATION_MODULES = {"mlflow_model.py", "_mlflow_code.py"}


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "<face>"
    name = parts[1]
    return "cli" if name.startswith("cli") or name == "__main__" else name


def _imports() -> list[tuple[Path, str, str, bool]]:
    """(file, importing package, imported module, at module level) for every import."""
    out = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            out += [(path, _package(module), n, id(node) in top) for n in names]
    return out


IMPORTS = _imports()


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_lower_floors_import_only_what_lies_below(package: str) -> None:
    bad = sorted(
        f"{p.relative_to(SRC)} imports {name}"
        for p, pkg, name, _top in IMPORTS
        if pkg == package and name.startswith("denpex_ml") and _package(name) not in ALLOWED[package] | {package}
    )
    assert not bad, "\n".join(bad)


def test_core_never_reaches_the_upper_floors() -> None:
    bad = sorted(
        f"{p.relative_to(SRC)} imports {name}"
        for p, pkg, name, _top in IMPORTS
        if pkg in CORE and name.startswith("denpex_ml") and _package(name) in UPPER
    )
    assert not bad, "\n".join(bad)


def test_no_two_packages_import_each_other() -> None:
    edges: defaultdict[str, set[str]] = defaultdict(set)
    for _p, pkg, name, _top in IMPORTS:
        if name.startswith("denpex_ml") and _package(name) != pkg:
            edges[pkg].add(_package(name))
    # the package face re-exports (lazily) from below; only it may be imported back
    cycles = sorted(
        f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and a in edges.get(b, set()) and "<face>" not in (a, b)
    )
    assert not cycles, cycles


def test_heavy_optional_libraries_only_inside_functions() -> None:
    bad = sorted(
        f"{p.relative_to(SRC)} imports {name} at module level"
        for p, _pkg, name, top in IMPORTS
        if top and name.split(".")[0] in HEAVY and p.name not in INTEGRATION_MODULES
    )
    assert not bad, "\n".join(bad)


def test_importing_the_library_and_classifying_pulls_no_heavy_library() -> None:
    code = (
        "import sys, denpex_ml, denpex_ml.model.core, denpex_ml.batch, denpex_ml.cli\n"
        f"print(sorted(m for m in {sorted(HEAVY | {'torch', 'sentence_transformers'})!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


#: modules that may open a tar or zip themselves: the one archive reader; model persistence
#: (an ``.npz`` is a zip of arrays, not a log archive); the log generator (it writes archives)
ARCHIVE_OPENERS = {"logs/archives.py", "model/persistence.py"}


def test_archives_are_opened_by_the_one_archive_reader() -> None:
    bad = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).as_posix() not in ARCHIVE_OPENERS
        and p.relative_to(SRC).parts[0] != "synthetic"
        and any(call in p.read_text(encoding="utf-8") for call in ("tarfile.open(", "zipfile.ZipFile("))
    )
    assert not bad, f"open archives through denpex_ml.logs.archives: {bad}"
