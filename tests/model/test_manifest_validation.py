"""Broken model directories: every one is a ModelError naming the file and the field or array.

Each case copies the shipped ``models/default`` to ``tmp_path`` and breaks one thing: the
manifest (schema: types, ranges, required checksums) or ``head.npz`` (truncated, wrong shapes,
extra or missing arrays, non-finite values) with its checksum fixed, so that only the schema
and layout checks stand between the broken file and the model.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import denpex_ml
from denpex_ml.errors import InvalidInputError, ModelError
from denpex_ml.model.core import load_model
from denpex_ml.model.persistence import models_root, read_model_dir, sha256_file

DEFAULT = models_root() / "default"

Mutation = Callable[[Path, dict[str, Any]], None]


@pytest.fixture()
def model_copy(tmp_path: Path) -> Path:
    out = tmp_path / "model"
    out.mkdir()
    for name in ("manifest.json", "head.npz", "taxonomy.json"):
        shutil.copy(DEFAULT / name, out / name)
    return out


def _set(key: str, value: object) -> Mutation:
    def mutate(_d: Path, m: dict[str, Any]) -> None:
        m[key] = value

    return mutate


def _drop(key: str) -> Mutation:
    def mutate(_d: Path, m: dict[str, Any]) -> None:
        del m[key]

    return mutate


def _set_in(key: str, sub: str, value: object) -> Mutation:
    def mutate(_d: Path, m: dict[str, Any]) -> None:
        m[key][sub] = value

    return mutate


def _arrays(d: Path) -> dict[str, np.ndarray]:
    with np.load(d / "head.npz", allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _rewrite_head(change: Callable[[dict[str, np.ndarray]], None]) -> Mutation:
    """Change the head's arrays and fix the checksum (only the layout check can catch it)."""

    def mutate(d: Path, m: dict[str, Any]) -> None:
        arrays = _arrays(d)
        change(arrays)
        np.savez_compressed(d / "head.npz", **arrays)  # type: ignore[arg-type]
        m["files"]["head.npz"] = sha256_file(d / "head.npz")

    return mutate


def _head_bytes(make: Callable[[bytes], bytes]) -> Mutation:
    def mutate(d: Path, m: dict[str, Any]) -> None:
        head = d / "head.npz"
        head.write_bytes(make(head.read_bytes()))
        m["files"]["head.npz"] = sha256_file(head)

    return mutate


def _object_array(d: Path, m: dict[str, Any]) -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(d / "head.npz", "a") as zf:
        zf.writestr("evil_object.npy", buf.getvalue())
    m["files"]["head.npz"] = sha256_file(d / "head.npz")


def _pop(name: str) -> Callable[[dict[str, np.ndarray]], None]:
    return lambda a: a.pop(name) and None


def _put(name: str, value: np.ndarray) -> Callable[[dict[str, np.ndarray]], None]:
    return lambda a: a.__setitem__(name, value)


def _poke(name: str, value: float) -> Callable[[dict[str, np.ndarray]], None]:
    def change(a: dict[str, np.ndarray]) -> None:
        arr = a[name].copy()
        arr.flat[0] = value
        a[name] = arr

    return change


#: (case id, mutation, substrings the message must hold)
CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    ("files-removed", _drop("files"), ("manifest.json", "files")),
    ("files-list", _set("files", []), ("manifest.json", "files")),
    ("files-empty", _set("files", {}), ("manifest.json", "files", "head.npz")),
    ("files-bad-digest", _set("files", {"head.npz": "abc"}), ("files.head.npz",)),
    ("files-escape", _set_in("files", "../../etc/passwd", "0" * 64), ("files", "plain file names")),
    ("format-true", _set("format_version", True), ("format_version", "True")),
    ("format-string", _set("format_version", "1"), ("format_version",)),
    ("format-float", _set("format_version", 1.0), ("format_version",)),
    ("format-future", _set("format_version", 99), ("format_version", "99")),
    ("layout-empty", _set("layout", {}), ("layout.n_classes",)),
    ("layout-string", _set_in("layout", "n_classes", "35"), ("layout.n_classes",)),
    ("layout-extra", _set_in("layout", "bogus", 1), ("layout.bogus",)),
    ("layout-disagrees", _set_in("layout", "embed_dim", 128), ("head.npz", "stage1_mean")),
    ("layout-structure", _set_in("layout", "n_structure", 77), ("structure_features",)),
    ("head-params-null", _set("head_params", None), ("head_params",)),
    ("head-params-negative-C", _set_in("head_params", "C", -1.0), ("head_params.C",)),
    ("head-params-float-folds", _set_in("head_params", "n_folds", 1.5), ("head_params.n_folds",)),
    ("threshold-word", _set("abstain_threshold", "high"), ("abstain_threshold", "'high'")),
    ("threshold-range", _set("abstain_threshold", 2), ("abstain_threshold",)),
    ("threshold-nan", _set("abstain_threshold", float("nan")), ("abstain_threshold",)),
    ("labels-empty", _set("labels", []), ("labels",)),
    ("labels-short", lambda _d, m: m["labels"].pop(), ("labels",)),
    ("labels-duplicate", lambda _d, m: m["labels"].__setitem__(1, m["labels"][0]), ("labels", "distinct")),
    ("encoder-number", _set("encoder", 7), ("encoder",)),
    ("taxonomy-hash-missing", _drop("taxonomy_hash"), ("taxonomy_hash",)),
    ("max-lines-zero", _set("max_lines", 0), ("max_lines",)),
    ("head-missing", lambda d, _m: (d / "head.npz").unlink(), ("head.npz", "missing")),
    ("head-modified", lambda d, _m: (d / "head.npz").write_bytes(b"PK\x03\x04junk"), ("checksum", "head.npz")),
    ("head-truncated", _head_bytes(lambda b: b[: len(b) // 2]), ("head.npz", "not a readable array file")),
    ("head-not-zip", _head_bytes(lambda _b: b"\x00" * 4096), ("head.npz", "not a readable array file")),
    ("array-shape", _rewrite_head(_put("stage1_coef", np.zeros((35, 764)))), ("head.npz", "stage1_coef")),
    ("array-entries", _rewrite_head(_put("entry_embeddings", np.zeros((35, 255), np.float32))), ("entry_embeddings",)),
    ("array-bank", _rewrite_head(_put("bank_labels", np.zeros(5, np.int64))), ("bank_labels",)),
    ("array-ndim", _rewrite_head(_put("temperature", np.float64(1.0))), ("temperature", "dimensions")),
    ("array-missing", _rewrite_head(_pop("temperature")), ("temperature", "missing")),
    ("array-extra", _rewrite_head(_put("surprise", np.zeros(3))), ("surprise", "unexpected")),
    ("array-dtype", _rewrite_head(_put("stage1_mean", np.array(["x"] * 765))), ("stage1_mean", "dtype")),
    ("array-object", _object_array, ("evil_object", "pickle")),
    ("array-nan", _rewrite_head(_poke("stage1_coef", float("nan"))), ("stage1_coef", "NaN")),
    ("array-zero-scale", _rewrite_head(_poke("stage1_scale", 0.0)), ("stage1_scale", "zeros")),
    ("array-class-range", _rewrite_head(_poke("bank_labels", 99)), ("bank_labels", "outside")),
    ("array-temperature", _rewrite_head(_put("temperature", np.array([-1.0]))), ("temperature", "positive")),
]


def _break(d: Path, mutate: Mutation) -> None:
    mf = d / "manifest.json"
    manifest = json.loads(mf.read_text())
    mutate(d, manifest)
    mf.write_text(json.dumps(manifest))


def test_the_shipped_model_passes_the_checks(model_copy: Path) -> None:
    manifest, arrays = read_model_dir(model_copy)
    assert manifest["format_version"] == 1 and "stage1_coef" in arrays


@pytest.mark.parametrize(("case", "mutate", "needles"), CASES, ids=[c[0] for c in CASES])
def test_broken_model_directory_is_a_model_error(
    model_copy: Path, case: str, mutate: Mutation, needles: tuple[str, ...]
) -> None:
    _break(model_copy, mutate)
    with pytest.raises(ModelError) as info:
        load_model(model_copy)
    message = str(info.value)
    assert str(model_copy) in message, message  # names the directory or file
    for needle in needles:
        assert needle in message, (case, message)


@pytest.mark.parametrize(
    "content",
    [b"[1, 2]", b"{not json", b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000, b'{"format_version": 1}'],
    ids=["array", "syntax", "not-utf8", "deep", "only-version"],
)
def test_unreadable_manifest_is_a_model_error(model_copy: Path, content: bytes) -> None:
    (model_copy / "manifest.json").write_bytes(content)
    with pytest.raises(ModelError, match=r"manifest\.json"):
        read_model_dir(model_copy)


def test_missing_directory_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not a model directory"):
        load_model(tmp_path / "nowhere")


def test_classify_limits_of_the_wrong_type_is_an_invalid_input_error() -> None:
    with pytest.raises(InvalidInputError, match="limits must be an IngestLimits"):
        denpex_ml.classify(text="[rank0]: RuntimeError: boom\n", limits="x")  # type: ignore[arg-type]
