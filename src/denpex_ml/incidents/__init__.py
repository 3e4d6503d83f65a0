"""The labelled-incident store: failures a team diagnosed, kept for the next retrain.

An :class:`IncidentStore` is a directory holding ``incidents.jsonl`` in the dataset
format of :mod:`denpex_ml.dataset` (see ``docs/dataset-format.md``), so
``load_incidents(store.file, labels=store.allowed_labels)`` and ``to_hf_dataset`` read
it as they read any other dataset. Every log is masked at ingress (tokens, e-mails,
user names, IPs and hostnames become stable per-incident pseudonyms) before it is
stored; the real values are never written.

Writes are atomic (a temporary file in the store directory, ``fsync``, ``os.replace``)
and serialised by an exclusive ``flock`` on ``.incidents.lock``, so concurrent
``add`` calls from several processes all land.

Example
-------
>>> import tempfile
>>> store = IncidentStore(tempfile.mkdtemp())
>>> inc = store.add({"rank0.log": "torch.OutOfMemoryError: CUDA out of memory on 10.1.2.3"}, label="cuda-oom")
>>> inc.logs["rank0.log"]
'torch.OutOfMemoryError: CUDA out of memory on ip-1'
>>> len(store), store.labels()
(1, {'cuda-oom': 1})
"""

from __future__ import annotations

from denpex_ml.incidents.store import (
    DEFAULT_MAX_BYTES,
    LOCK_NAME,
    ORIGIN_USER,
    RESERVED_META,
    STORE_NAME,
    IncidentStore,
    content_sha256,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "LOCK_NAME",
    "ORIGIN_USER",
    "RESERVED_META",
    "STORE_NAME",
    "IncidentStore",
    "content_sha256",
]
