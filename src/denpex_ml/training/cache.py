"""On-disk caches that make retraining fast: job features and template embeddings.

* :class:`FeatureStore` — the base feature vector and TF-IDF text of every featurised job,
  keyed by the job's content. Valid for one *featurizer signature* (encoder, taxonomy
  fingerprints, line budget, library version): a retrain with the same taxonomy featurises
  only the new incidents.
* :class:`EmbeddingStore` — template text → vector for one encoder. Survives taxonomy
  changes (a new class changes every job's features, not the embedding of a line).
* :class:`SplitStore` — the generated synthetic splits of one generator signature (the
  generator's own source, the taxonomy's content, the split sizes and seed): a retrain with
  the same taxonomy reads them instead of drawing them again.

Both are plain arrays (``.npy``/``.npz`` read with ``allow_pickle=False``) and JSON, written
atomically. The cache lives in ``$DENPEX_CACHE`` or ``~/.cache/denpex_ml``; deleting it is
always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from denpex_ml.embedding import CachedEncoder
from denpex_ml.model.featurize import STRUCTURE_NAMES, Featurizer
from denpex_ml.taxonomy import Taxonomy

__all__ = [
    "EmbeddingStore",
    "FeatureStore",
    "SplitStore",
    "cache_root",
    "example_key",
    "featurizer_signature",
    "generator_signature",
]

#: Bump when featurisation changes in a way the signature does not capture.
CACHE_VERSION = 4


def cache_root() -> Path:
    """``$DENPEX_CACHE``, else ``$XDG_CACHE_HOME/denpex_ml``, else ``~/.cache/denpex_ml``."""
    if os.environ.get("DENPEX_CACHE"):
        return Path(os.environ["DENPEX_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "denpex_ml"


def featurizer_signature(featurizer: Featurizer, taxonomy: Taxonomy) -> str:
    """What a cached feature vector depends on, hashed."""
    from denpex_ml._version import __version__

    spec = {
        "cache_version": CACHE_VERSION,
        "library": __version__,
        "encoder": featurizer.encoder.name,
        "taxonomy": taxonomy.fingerprint_hash(),
        "max_lines": featurizer.max_lines,
        "structure": list(STRUCTURE_NAMES),
        "line_bank": featurizer.line_bank.texts if featurizer.line_bank is not None else None,
        "width": featurizer.n_base_features,
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def example_key(source: Any) -> str:
    """Content hash of a job's logs (text or mapping name -> text)."""
    return hashlib.sha256(json.dumps(source, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:24]


def _atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class FeatureStore:
    """Feature vectors and texts of featurised jobs for one featurizer signature."""

    def __init__(self, root: Path, signature: str, width: int) -> None:
        self.root = root
        self.dir = root / "features" / signature
        self.width = width
        self._index: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        self._texts: list[str] = []
        self._dirty = False
        self.hits = 0
        self.misses = 0
        keys_file, x_file = self.dir / "keys.json", self.dir / "X.npy"
        if keys_file.exists() and x_file.exists():
            try:
                keys = json.loads(keys_file.read_text(encoding="utf-8"))
                X = np.load(x_file, allow_pickle=False)
                texts = self._read_texts()
            except (OSError, ValueError, UnicodeDecodeError):
                return  # a damaged cache is ignored and rewritten
            if texts is not None and X.ndim == 2 and X.shape == (len(keys), width) and len(texts) == len(keys):
                self._index = {k: i for i, k in enumerate(keys)}
                self._rows = list(X.astype(np.float32))
                self._texts = texts

    def _read_texts(self) -> list[str] | None:
        """The texts: one UTF-8 file and where each text ends (``texts.bin``, ``text_ends.npy``:
        a tenth of the time of a JSON line per text, what a warm retrain waited a second for);
        a cache of the older layout (``texts.jsonl``) is read and rewritten in this one."""
        blob_file, ends_file, legacy = self.dir / "texts.bin", self.dir / "text_ends.npy", self.dir / "texts.jsonl"
        if blob_file.exists() and ends_file.exists():
            blob = blob_file.read_bytes()
            ends = np.load(ends_file, allow_pickle=False)
            if ends.ndim != 1 or (len(ends) and (int(ends[-1]) != len(blob) or (np.diff(ends) < 0).any())):
                raise ValueError("text ends do not fit the texts")
            stops = ends.tolist()
            return [blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0, *stops[:-1]], stops, strict=True)]
        if legacy.exists():
            self._dirty = True
            return [json.loads(line) for line in legacy.read_text(encoding="utf-8").splitlines()]
        return None

    def get(self, key: str) -> tuple[np.ndarray, str] | None:
        i = self._index.get(key)
        if i is None:
            self.misses += 1
            return None
        self.hits += 1
        return self._rows[i], self._texts[i]

    def put(self, key: str, x: np.ndarray, text: str) -> None:
        if key in self._index:
            return
        self._index[key] = len(self._rows)
        self._rows.append(np.asarray(x, dtype=np.float32))
        self._texts.append(text)
        self._dirty = True

    def __len__(self) -> int:
        return len(self._rows)

    def save(self) -> None:
        if not self._dirty:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        X = np.stack(self._rows) if self._rows else np.zeros((0, self.width), dtype=np.float32)
        _atomic_write(self.dir / "X.npy", lambda fh: np.save(fh, X, allow_pickle=False))
        encoded = [t.encode("utf-8", "surrogatepass") for t in self._texts]
        ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
        _atomic_write(self.dir / "texts.bin", lambda fh: fh.write(b"".join(encoded)))
        _atomic_write(self.dir / "text_ends.npy", lambda fh: np.save(fh, ends, allow_pickle=False))
        (self.dir / "texts.jsonl").unlink(missing_ok=True)
        _atomic_write(self.dir / "keys.json", lambda fh: fh.write(json.dumps(list(self._index)).encode()))
        self._dirty = False


class EmbeddingStore:
    """Template embeddings of one encoder, loaded into and saved from a :class:`CachedEncoder`."""

    def __init__(self, root: Path, encoder_name: str) -> None:
        self.root = root
        self.path = root / "embeddings" / (re.sub(r"[^\w.-]+", "_", encoder_name) + ".npz")
        #: the encoder's ``inserted`` count when its cache last equalled the file (None: never)
        self._in_file: int | None = None

    def load_into(self, encoder: CachedEncoder) -> int:
        """Fill ``encoder``'s cache; returns the number of templates loaded. Texts are stored as
        one UTF-8 buffer and where each ends (a fixed-width string array pads every text to the
        longest one: a few long templates made the file hundreds of MB); files of the older
        layout (``texts``) are read too."""
        if not self.path.exists():
            return 0
        try:
            with np.load(self.path, allow_pickle=False) as z:
                vecs = z["vectors"]
                current = "text_utf8" in z.files
                if current:
                    blob, ends = z["text_utf8"].tobytes(), z["text_ends"]
                    starts = np.concatenate([[0], ends[:-1]]) if len(ends) else ends
                    texts = [blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends, strict=True)]
                else:
                    texts = [str(t) for t in z["texts"]]
        except (OSError, ValueError, KeyError, UnicodeDecodeError):
            return 0
        if vecs.ndim != 2 or vecs.shape[1] != encoder.dim or len(texts) != len(vecs):
            return 0
        before = encoder.inserted
        encoder.preload(zip(texts, vecs, strict=True))
        # the cache equals the file only if it held nothing before (an older layout is rewritten)
        self._in_file = encoder.inserted if before == 0 and current else None
        return len(texts)

    def save_from(self, encoder: CachedEncoder) -> None:
        """Write ``encoder``'s cache to the file, unless it holds nothing the file lacks (a warm
        retrain embeds no new template: rewriting the file cost seconds for nothing)."""
        if self._in_file is not None and encoder.inserted == self._in_file and self.path.exists():
            return
        items = encoder.items()
        if not items:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        encoded = [t.encode("utf-8", "surrogatepass") for t, _ in items]
        blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
        vecs = np.stack([v for _, v in items]).astype(np.float32)
        _atomic_write(self.path, lambda fh: np.savez(fh, text_utf8=blob, text_ends=ends, vectors=vecs))
        self._in_file = encoder.inserted


def generator_signature(taxonomy: Taxonomy, per_class: tuple[int, int, int], seed: int) -> str:
    """What the synthetic splits depend on, hashed: the generator's source files (any edit of a
    recipe draws other incidents), the taxonomy's full content (recipes draw its fingerprints and
    texts), the split sizes and the seed."""
    from denpex_ml import synthetic

    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, "per_class": list(per_class), "seed": seed}).encode())
    h.update(taxonomy.to_json().encode())
    root = Path(synthetic.__file__).parent
    for src in sorted(root.rglob("*.py")):
        h.update(src.relative_to(root).as_posix().encode())
        h.update(src.read_bytes())
    return h.hexdigest()[:16]


class SplitStore:
    """Generated synthetic splits (``{"train", "val", "test"}`` lists of incident records) for one
    :func:`generator_signature`, as one JSON file; a file that does not read back is regenerated."""

    def __init__(self, root: Path, signature: str) -> None:
        self.path = root / "synthetic" / f"{signature}.json"

    def load(self) -> dict[str, list[dict[str, Any]]] | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or set(data) != {"train", "val", "test"}:
            return None
        if not all(isinstance(v, list) and all(isinstance(r, dict) for r in v) for v in data.values()):
            return None
        return data

    def save(self, splits: dict[str, list[dict[str, Any]]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blob = json.dumps(splits, ensure_ascii=False).encode("utf-8")
        _atomic_write(self.path, lambda fh: fh.write(blob))
