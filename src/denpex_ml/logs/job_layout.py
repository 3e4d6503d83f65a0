"""How the files of a path are laid out into jobs: a warning when what is read as one job
looks like the folders of several (used by ``classify``; ``denpex-ml score`` splits them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import re2

__all__ = ["several_jobs_warning"]

#: Folder names that read as the nodes of one job (``node-a/rank0.log``, ``worker-3/``), not jobs.
_NODE_FOLDER = re2.compile(r"(?i)^(node|host|worker|rank|gpu|ip|pod|machine|server|slave|master)([-_.]?[\w.-]*)?$")


def several_jobs_warning(sources: Sequence[str], name: str) -> str | None:
    """A warning when the files read as one job look like the folders of several jobs.

    ``sources`` are the file names a :class:`~denpex_ml.logs.LogBundle` was read from
    (``bundle.sources``: relative to a directory, or ``<archive>/<member>``); ``name`` is the
    path the user gave. Several jobs: at least two top-level folders (after a single enclosing
    folder is looked through) that hold a file of the same name (each has its ``job.log`` or
    ``rank0.log``), unless the folders are named like the nodes of one job (``node-a``,
    ``host1``, ``worker-3``, ``ip-10-0-0-1``...). ``classify`` then merges them into one
    diagnosis; ``denpex-ml score`` / :func:`~denpex_ml.batch.score_archive` scores each.

    >>> several_jobs_warning(["a/job.log", "b/job.log", "c/job.log"], "jobs/") is not None
    True
    >>> several_jobs_warning(["node-a/rank0.log", "node-b/rank0.log"], "job/") is None
    True
    """
    parts = [PurePosixPath(s).parts for s in sources if s]
    base = Path(name).name
    if parts and all(len(p) > 1 and p[0] == base for p in parts):  # <archive>/<member>
        parts = [p[1:] for p in parts]
    while parts and all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        parts = [p[1:] for p in parts]  # one enclosing folder: ``tar czf jobs.tar.gz jobs/``
    by_file: defaultdict[str, set[str]] = defaultdict(set)
    folders: set[str] = set()
    for p in parts:
        if len(p) > 1:
            folders.add(p[0])
            by_file["/".join(p[1:])].add(p[0])
    if len(folders) < 2 or all(_NODE_FOLDER.fullmatch(f) for f in folders):
        return None
    repeated = max(by_file.items(), key=lambda kv: (len(kv[1]), kv[0].endswith((".log", ".txt", ".gz"))))
    if len(repeated[1]) < 2:
        return None
    shown = ", ".join(sorted(folders)[:3]) + (", ..." if len(folders) > 3 else "")
    return (
        f"{name} looks like several jobs ({len(folders)} folders such as {shown} each hold {repeated[0]}) but was "
        f"read as ONE job and diagnosed together; to diagnose each job: denpex-ml score {name} -o results.jsonl "
        "(or score_archive)"
    )
