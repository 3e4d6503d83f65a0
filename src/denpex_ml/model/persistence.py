"""Model directories: a JSON manifest plus arrays, checked on load. Never pickle.

Layout (format version 1)::

    manifest.json   format_version, library versions, encoder id, taxonomy hash, label order,
                    feature layout, head parameters, abstention threshold, training-data hash,
                    metrics, and the SHA-256 of every other file
    head.npz        the head's arrays (loaded with ``allow_pickle=False``)

Loading is an audit before construction (the way skops loads): the manifest is validated
against a schema (:class:`ManifestV1`: types, ranges, required checksums), every listed file
is checked against its SHA-256, the array headers inside ``head.npz`` are checked against the
feature layout (names, dtypes, shapes, sizes) *before any array is read*, and the arrays read
are checked once more (finite values, class indices in range). Anything wrong is a
:class:`~denpex_ml.errors.ModelError` naming the file and the field or array.

Changing the format: bump :data:`FORMAT_VERSION`, keep a loader for every older version
in :data:`LOADERS` with a test that loads a stored example of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import zipfile
import zlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError, model_validator

from denpex_ml._version import __version__
from denpex_ml.errors import ModelError
from denpex_ml.model.head import PAIR_FEATURES
from denpex_ml.model.outside import n_outside_features

__all__ = [
    "FORMAT_VERSION",
    "LOADERS",
    "MAX_HEAD_BYTES",
    "MAX_MANIFEST_BYTES",
    "TAXONOMY_FILE",
    "ManifestV1",
    "check_head_arrays",
    "model_id",
    "models_root",
    "read_model_dir",
    "read_model_file",
    "sha256_file",
    "write_model_dir",
]

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
HEAD_FILE = "head.npz"
#: The taxonomy the model was trained with (entries as JSON): a model directory carries it.
TAXONOMY_FILE = "taxonomy.json"
#: Largest ``taxonomy.json`` read.
MAX_TAXONOMY_BYTES = 32 * 1024**2
#: Largest ``manifest.json`` read (the shipped one is a few KB).
MAX_MANIFEST_BYTES = 16 * 1024**2
#: Most uncompressed bytes of all arrays in ``head.npz`` together (the shipped head is ~10 MB).
MAX_HEAD_BYTES = 2 * 1024**3

_SHA256 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
#: A plain file name inside the model directory: no separators, no leading dot, no ``..``.
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_Number = Annotated[StrictFloat, Field(allow_inf_nan=False)]  # strict floats take ints, never bools or text


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class LayoutV1(_Strict):
    """``layout`` of a version-1 manifest (see :class:`~denpex_ml.model.head.FeatureLayout`)."""

    n_classes: Annotated[StrictInt, Field(ge=2, le=100_000)]
    n_structure: Annotated[StrictInt, Field(ge=0, le=1_000_000)]
    embed_dim: Annotated[StrictInt, Field(ge=1, le=65_536)]
    n_hang: Annotated[StrictInt, Field(ge=0, le=1_000_000)] = 0
    fp_per_class: Annotated[StrictInt, Field(ge=4, le=5)] = 4

    @model_validator(mode="after")
    def _hang_inside_structure(self) -> LayoutV1:
        if self.n_hang > self.n_structure:
            raise ValueError(f"n_hang ({self.n_hang}) must not exceed n_structure ({self.n_structure})")
        return self

    @property
    def width(self) -> int:
        """Columns of a base vector."""
        return self.fp_per_class * self.n_classes + self.n_structure + 2 * self.embed_dim


class HeadParamsV1(_Strict):
    """``head_params`` of a version-1 manifest (the :class:`~denpex_ml.model.head.DenpexHead` arguments)."""

    C: Annotated[_Number, Field(gt=0)]
    n_folds: Annotated[StrictInt, Field(ge=2)]
    k: Annotated[StrictInt, Field(ge=1)]
    random_state: StrictInt


class ManifestV1(BaseModel):
    """Schema of a version-1 ``manifest.json``: validated before any file it names is read.

    Unknown top-level keys (``metrics``, ``config``, ``versions`` ...) are kept, not checked:
    they describe the model and never change how it is built.
    """

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    format_version: StrictInt
    #: SHA-256 of every file the loader reads; ``head.npz`` must be listed.
    files: dict[StrictStr, _SHA256]
    labels: Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=2)]
    encoder: Annotated[StrictStr, Field(min_length=1)]
    taxonomy_hash: Annotated[StrictStr, Field(min_length=1)]
    layout: LayoutV1
    head_params: HeadParamsV1
    abstain_threshold: Annotated[_Number, Field(ge=0, le=1)]
    #: how much likelier the hang entries are when the hang analysis finds a hang (1: no shift)
    hang_prior: Annotated[_Number, Field(ge=1, le=100)] = 1.0
    #: ``(a, b)`` of the confidence recalibration ``sigmoid(a * logit(c) + b)`` (``a`` > 0: monotone)
    confidence_map: Annotated[list[_Number], Field(min_length=2, max_length=2)] = [1.0, 0.0]
    #: the probability at which the out-of-taxonomy detector (``outside_*`` arrays) answers ``unknown``
    outside_threshold: Annotated[_Number, Field(ge=0, le=1)] | None = None
    structure_features: list[StrictStr] = []
    max_lines: Annotated[StrictInt, Field(ge=1, le=100_000)] = 96

    @model_validator(mode="after")
    def _consistent(self) -> ManifestV1:
        if self.format_version != 1:
            raise ValueError(f"format_version must be 1 for this schema, got {self.format_version}")
        if HEAD_FILE not in self.files:
            raise ValueError(f"files must list {HEAD_FILE} with its SHA-256 (got {sorted(self.files)})")
        bad = [n for n in self.files if not _FILE_NAME.match(n) or n == MANIFEST]
        if bad:
            raise ValueError(f"files must be plain file names in the model directory, got {bad[0]!r}")
        if not 0 < self.confidence_map[0] <= 10 or not -10 <= self.confidence_map[1] <= 10:
            raise ValueError(f"confidence_map must be (a in (0, 10], b in [-10, 10]), got {self.confidence_map}")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError("labels must be distinct")
        if len(self.labels) != self.layout.n_classes:
            raise ValueError(f"{len(self.labels)} labels but layout.n_classes is {self.layout.n_classes}")
        if self.structure_features and len(self.structure_features) != self.layout.n_structure:
            raise ValueError(
                f"{len(self.structure_features)} structure_features but layout.n_structure is {self.layout.n_structure}"
            )
        return self


def model_id(name: str | None, manifest: dict[str, Any]) -> str:
    """``<directory name>@<first 12 hex of head.npz's SHA-256>``: the one name of a model in
    results, reports and lineage (``in-memory`` / ``unsaved`` for a model never saved)."""
    digest = str(manifest.get("files", {}).get("head.npz", ""))
    return f"{name or 'in-memory'}@{digest[:12] or 'unsaved'}"


def models_root() -> Path:
    """Where shipped models live: ``denpex_ml/models`` in a wheel, ``models/`` in a checkout."""
    packaged = Path(str(resources.files("denpex_ml"))) / "models"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "models"


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict[str, str]:
    import numpy
    import sklearn

    return {
        "denpex_ml": __version__,
        "numpy": numpy.__version__,
        "scikit-learn": sklearn.__version__,
        "python": platform.python_version(),
    }


def write_model_dir(
    path: str | os.PathLike[str],
    manifest: dict[str, Any],
    arrays: dict[str, np.ndarray],
    *,
    files: dict[str, bytes] | None = None,
) -> Path:
    """Write arrays, data ``files`` (name -> bytes, e.g. :data:`TAXONOMY_FILE`) and the
    manifest (with every file's checksum) to ``path``."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    head = out / HEAD_FILE
    np.savez_compressed(head, **arrays)  # type: ignore[arg-type]
    full = dict(manifest)
    full["format_version"] = FORMAT_VERSION
    full["versions"] = _versions()
    full["files"] = {HEAD_FILE: sha256_file(head)}
    for name, data in (files or {}).items():
        if not _FILE_NAME.match(name) or name in (MANIFEST, HEAD_FILE):
            raise ModelError(f"{out}: cannot write model file {name!r}")
        (out / name).write_bytes(data)
        full["files"][name] = sha256_file(out / name)
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(out / MANIFEST)
    return out


# -- validation ---------------------------------------------------------------------------------
def _validation_message(where: Path, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        msg = str(err["msg"]).removeprefix("Value error, ")
        if not err["loc"]:  # a check across fields: its message names them
            parts.append(msg)
            continue
        if err["type"] == "missing":
            parts.append(f"field {'.'.join(str(x) for x in err['loc'])}: required, missing")
            continue
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        parts.append(f"field {'.'.join(str(x) for x in err['loc'])}: {msg} (got {got})")
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return f"{where}: invalid model manifest: " + "; ".join(parts) + more


def _validate_manifest(mf: Path, manifest: dict[str, Any]) -> ManifestV1:
    try:
        return ManifestV1.model_validate(manifest)
    except ValidationError as exc:
        raise ModelError(_validation_message(mf, exc)) from None


def _check_files(path: Path, spec: ManifestV1) -> None:
    for name, digest in spec.files.items():
        f = path / name
        if f.is_symlink() or not f.is_file():
            raise ModelError(f"{path}: file {name} listed in the manifest is missing (or not a regular file)")
        try:
            actual = sha256_file(f)
        except OSError as exc:
            raise ModelError(f"{path}: file {name} cannot be read ({exc.strerror or exc})") from None
        if actual != digest:
            raise ModelError(f"{path}: checksum of {name} does not match the manifest (corrupt or modified)")


#: Arrays of a version-1 head: name -> (dtype kinds, shape with symbols for free sizes, required).
def _head_spec(lay: LayoutV1) -> dict[str, tuple[str, tuple[int | str, ...], bool]]:
    w, nc, ed, p = lay.width, lay.n_classes, lay.embed_dim, len(PAIR_FEATURES)
    wo = n_outside_features(lay)
    return {
        "stage1_mean": ("f", (w,), True),
        "stage1_scale": ("f", (w,), True),
        "stage1_coef": ("f", ("rows", w), True),
        "stage1_intercept": ("f", ("rows",), True),
        "stage1_classes": ("iu", ("classes",), True),
        "stage2_mean": ("f", (p,), True),
        "stage2_scale": ("f", (p,), True),
        "stage2_coef": ("f", (1, p), True),
        "stage2_intercept": ("f", (1,), True),
        "stage2_classes": ("iu", (2,), True),
        "bank_vectors": ("f", ("bank", 2 * ed), True),
        "bank_labels": ("iu", ("bank",), True),
        "entry_embeddings": ("f", (nc, ed), True),
        "hang_affinity": ("f", (nc, lay.n_hang), False),
        "temperature": ("f", (1,), True),
        "temperature_hang": ("f", (1,), False),
        "outside_mean": ("f", (wo,), False),
        "outside_scale": ("f", (wo,), False),
        "outside_coef": ("f", (1, wo), False),
        "outside_intercept": ("f", (1,), False),
        "outside_classes": ("iu", (2,), False),
    }


def check_head_arrays(
    where: str | os.PathLike[str], layout: LayoutV1, shapes: dict[str, tuple[tuple[int, ...], np.dtype[Any]]]
) -> None:
    """Check array names, dtypes and shapes (``name -> (shape, dtype)``) against ``layout``.

    Raises :class:`ModelError` naming ``where`` and the array: a missing or unexpected array,
    an object or non-numeric dtype, or a shape that disagrees with the layout.
    """
    spec = _head_spec(layout)
    missing = [n for n, (_, _, required) in spec.items() if required and n not in shapes]
    if missing:
        raise ModelError(f"{where}: head array(s) {', '.join(missing)} missing")
    unexpected = sorted(set(shapes) - set(spec))
    if unexpected:
        raise ModelError(f"{where}: unexpected head array(s) {', '.join(unexpected)} (not part of format 1)")
    sizes: dict[str, int] = {}
    for name, (shape, dtype) in shapes.items():
        kinds, want, _ = spec[name]
        if dtype.hasobject or dtype.kind not in kinds:
            raise ModelError(f"{where}: head array {name} has dtype {dtype}, expected kind {kinds!r} (numbers)")
        if len(shape) != len(want):
            raise ModelError(f"{where}: head array {name} has shape {shape}, expected {len(want)} dimensions {want}")
        for axis, (got, exp) in enumerate(zip(shape, want, strict=True)):
            if isinstance(exp, str):
                exp = sizes.setdefault(exp, got)
            if got != exp:
                raise ModelError(
                    f"{where}: head array {name} has shape {shape}, but the layout needs {exp} along axis {axis} "
                    f"(expected {tuple(sizes.get(e, e) if isinstance(e, str) else e for e in want)})"
                )
    rows, classes = sizes["rows"], sizes["classes"]
    if not (rows == classes or (rows == 1 and classes == 2)) or classes > layout.n_classes or classes < 2:
        raise ModelError(
            f"{where}: head arrays stage1_coef ({rows} rows) and stage1_classes ({classes}) disagree "
            f"(layout.n_classes is {layout.n_classes})"
        )
    if sizes["bank"] < 1:
        raise ModelError(f"{where}: head array bank_vectors is empty (the retrieval bank needs incidents)")
    outside = sorted(n for n in spec if n.startswith("outside_"))
    held = [n for n in outside if n in shapes]
    if held and len(held) != len(outside):
        raise ModelError(
            f"{where}: the out-of-taxonomy detector is incomplete: {', '.join(sorted(set(outside) - set(held)))} missing"
        )


def _npz_headers(head: Path) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    """Names, shapes and dtypes of the arrays in an ``.npz``, from their headers only."""
    out: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
    try:
        with zipfile.ZipFile(head) as zf:
            infos = zf.infolist()
            if len(infos) > 64:
                raise ModelError(f"{head}: {len(infos)} members, a format-1 head has at most 16 arrays")
            total = sum(i.file_size for i in infos)
            if total > MAX_HEAD_BYTES:
                raise ModelError(f"{head}: arrays declare {total} bytes, more than the limit of {MAX_HEAD_BYTES}")
            for info in infos:
                if not info.filename.endswith(".npy") or "/" in info.filename:
                    raise ModelError(f"{head}: member {info.filename!r} is not an array (.npy)")
                name = info.filename[: -len(".npy")]
                with zf.open(info) as fh:
                    version = np.lib.format.read_magic(fh)
                    if version == (1, 0):
                        shape, _fortran, dtype = np.lib.format.read_array_header_1_0(fh)
                    elif version == (2, 0):
                        shape, _fortran, dtype = np.lib.format.read_array_header_2_0(fh)
                    else:
                        raise ModelError(f"{head}: array {name} uses .npy version {version}, expected 1.0 or 2.0")
                    header_len = fh.tell()
                if dtype.hasobject:
                    raise ModelError(f"{head}: array {name} holds Python objects (a pickle); refused")
                n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if n_bytes != info.file_size - header_len:
                    raise ModelError(
                        f"{head}: array {name} is truncated or padded: its header declares shape {shape} "
                        f"({n_bytes} bytes) but it holds {info.file_size - header_len} bytes"
                    )
                out[name] = (tuple(int(s) for s in shape), dtype)
    except ModelError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
        raise ModelError(
            f"{head}: not a readable array file, truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from None
    return out


def _read_arrays(head: Path, layout: LayoutV1) -> dict[str, np.ndarray]:
    check_head_arrays(head, layout, _npz_headers(head))  # before any array is read
    try:
        with np.load(head, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as exc:
        raise ModelError(
            f"{head}: not a readable array file, truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from None
    check_head_arrays(head, layout, {k: (a.shape, a.dtype) for k, a in arrays.items()})
    for name, a in arrays.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise ModelError(f"{head}: head array {name} holds NaN or infinite values")
    for name in ("stage1_scale", "stage2_scale", "outside_scale"):
        if name in arrays and (arrays[name] == 0).any():
            raise ModelError(f"{head}: head array {name} holds zeros (a scale divides)")
    if "temperature_hang" in arrays and not float(arrays["temperature_hang"][0]) > 0:
        raise ModelError(
            f"{head}: head array temperature_hang must be positive, got {float(arrays['temperature_hang'][0])}"
        )
    if not float(arrays["temperature"][0]) > 0:
        raise ModelError(f"{head}: head array temperature must be positive, got {float(arrays['temperature'][0])}")
    for name, hi in (
        ("stage1_classes", layout.n_classes),
        ("bank_labels", layout.n_classes),
        ("stage2_classes", 2),
        ("outside_classes", 2),
    ):
        if name not in arrays:
            continue
        a = arrays[name]
        if a.size and (int(a.min()) < 0 or int(a.max()) >= hi):
            raise ModelError(f"{head}: head array {name} holds class indices outside [0, {hi})")
    if len(np.unique(arrays["stage1_classes"])) != len(arrays["stage1_classes"]):
        raise ModelError(f"{head}: head array stage1_classes repeats a class")
    return arrays


def _load_v1(path: Path, manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    spec = _validate_manifest(path / MANIFEST, manifest)
    _check_files(path, spec)
    return manifest, _read_arrays(path / HEAD_FILE, spec.layout)


def read_model_file(path: str | os.PathLike[str], manifest: dict[str, Any], name: str, max_bytes: int) -> bytes | None:
    """The bytes of a data file the manifest lists (``None`` when it lists none of that name),
    checked against its SHA-256 again as it is read."""
    digest = (manifest.get("files") or {}).get(name)
    if digest is None:
        return None
    f = Path(path) / name
    if f.is_symlink() or not f.is_file():
        raise ModelError(f"{path}: file {name} listed in the manifest is missing (or not a regular file)")
    if f.stat().st_size > max_bytes:
        raise ModelError(f"{path}: {name} is larger than {max_bytes} bytes")
    data = f.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise ModelError(f"{path}: checksum of {name} does not match the manifest (corrupt or modified)")
    return data


#: Loaders by format version (keep old ones when the format changes).
LOADERS: dict[int, Callable[[Path, dict[str, Any]], tuple[dict[str, Any], dict[str, np.ndarray]]]] = {1: _load_v1}


def read_model_dir(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify a model directory: the manifest (validated against its schema) and
    the head's arrays (checksums, then shapes against the layout).

    Raises
    ------
    ModelError
        Naming the file and the field or array that is wrong.
    """
    p = Path(path)
    mf = p / MANIFEST
    if not mf.is_file():
        raise ModelError(f"{p}: not a model directory ({MANIFEST} missing)")
    try:
        size = mf.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise ModelError(f"{mf}: {size} bytes, more than the limit of {MAX_MANIFEST_BYTES} for a manifest")
        manifest = json.loads(mf.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ModelError(f"{mf}: not valid UTF-8 JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(manifest, dict):
        raise ModelError(f"{mf}: expected a JSON object, got {type(manifest).__name__}")
    version = manifest.get("format_version")
    loader = LOADERS.get(version) if type(version) is int else None
    if loader is None:
        raise ModelError(
            f"{mf}: field format_version: unsupported value {version!r} (this library reads the integers {sorted(LOADERS)})"
        )
    return loader(p, manifest)
