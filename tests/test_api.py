"""The public surface and its promises (no side effects at import, lazy model)."""

from __future__ import annotations

import subprocess
import sys

import denpex_ml


def test_public_surface() -> None:
    for name in denpex_ml.__all__:
        assert getattr(denpex_ml, name) is not None, name
    assert issubclass(denpex_ml.LogNotFoundError, FileNotFoundError)
    assert issubclass(denpex_ml.NotALogError, ValueError)
    assert issubclass(denpex_ml.InvalidInputError, TypeError)


def test_import_has_no_heavy_side_effects() -> None:
    code = (
        "import sys, logging; import denpex_ml; "
        "heavy = [m for m in ('numpy', 'sklearn', 'torch', 'mlflow', 'sentence_transformers', 'datasets') if m in sys.modules]; "
        "assert not heavy, heavy; assert not logging.getLogger().handlers; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_one_version_for_the_package_the_distribution_and_the_model_manifest() -> None:
    import tomllib
    from pathlib import Path

    from denpex_ml._version import __version__

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert denpex_ml.__version__ == __version__ == pyproject["project"]["version"]
