"""The member-count and nesting-depth limits of reading archives (``IngestLimits.max_members``,
``IngestLimits.max_depth``, ``BatchLimits.max_members``).

Each limit is tested on both sides: an input just inside it is read in full, one just beyond
it is refused with :class:`~denpex_ml.errors.InputTooLargeError` naming the limit, so a
limit that is never checked, or checked one level off, fails here.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from denpex_ml.batch import BatchLimits, discover_jobs, score_archive
from denpex_ml.errors import InputTooLargeError
from denpex_ml.logs import IngestLimits, read_logs

LOG = b"[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _nested(tmp_path: Path, kind: str, archives: int) -> Path:
    """A log inside ``archives`` archives of ``kind``, each inside the next."""
    pack: Callable[[dict[str, bytes]], bytes] = _tar if kind == "tar" else _zip
    data, name = LOG, "rank0.log"
    for i in range(archives):
        data, name = pack({name: data}), f"level{i}.{kind}"
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _compressed(tmp_path: Path, times: int) -> Path:
    data, name = LOG, "job.log"
    for _ in range(times):
        data, name = gzip.compress(data), name + ".gz"
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- max_depth ------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_depth", [1, 2])
def test_gzip_applied_up_to_max_depth_times_is_read_and_once_more_is_refused(tmp_path: Path, max_depth: int) -> None:
    limits = IngestLimits(max_depth=max_depth)
    assert read_logs(_compressed(tmp_path, max_depth), limits=limits).n_lines == 1
    with pytest.raises(InputTooLargeError, match=r"compressed more than \d+ times \(IngestLimits.max_depth\)"):
        read_logs(_compressed(tmp_path, max_depth + 1), limits=limits)


def test_default_depth_refuses_a_triple_gzip(tmp_path: Path) -> None:
    assert IngestLimits().max_depth == 2
    assert read_logs(_compressed(tmp_path, 2)).n_lines == 1
    with pytest.raises(InputTooLargeError, match="max_depth"):
        read_logs(_compressed(tmp_path, 3))


@pytest.mark.parametrize("kind", ["tar", "zip"])
@pytest.mark.parametrize("max_depth", [1, 2])
def test_archives_nested_up_to_max_depth_are_read_and_one_deeper_is_refused(
    tmp_path: Path, kind: str, max_depth: int
) -> None:
    # max_depth counts archives *inside* the outermost one
    limits = IngestLimits(max_depth=max_depth)
    (tmp_path / "ok").mkdir()
    (tmp_path / "deep").mkdir()
    assert read_logs(_nested(tmp_path / "ok", kind, max_depth + 1), limits=limits).n_lines == 1
    with pytest.raises(InputTooLargeError, match=r"archives nested deeper than \d+ \(IngestLimits.max_depth\)"):
        read_logs(_nested(tmp_path / "deep", kind, max_depth + 2), limits=limits)


def test_an_archive_inside_a_compressed_archive_counts_both_limits(tmp_path: Path) -> None:
    """``job.tar.gz`` holding ``inner.tar.gz``: compression does not reset the archive depth."""
    inner = gzip.compress(_tar({"deepest.tar": _tar({"rank0.log": LOG})}))
    path = tmp_path / "job.tar.gz"
    path.write_bytes(gzip.compress(_tar({"inner.tar.gz": inner})))
    assert read_logs(path, limits=IngestLimits(max_depth=2)).n_lines == 1
    with pytest.raises(InputTooLargeError, match="max_depth"):
        read_logs(path, limits=IngestLimits(max_depth=1))


# -- max_members ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_an_archive_with_more_members_than_max_members_is_refused(tmp_path: Path, kind: str) -> None:
    members = {f"rank{i}.log": LOG.replace(b"rank0", f"rank{i}".encode()) for i in range(6)}
    path = tmp_path / f"job.{kind}"
    path.write_bytes(_tar(members) if kind == "tar" else _zip(members))
    assert read_logs(path, limits=IngestLimits(max_members=20)).ranks == list(range(6))
    with pytest.raises(InputTooLargeError, match=r"more than 3 files \(IngestLimits.max_members\)"):
        read_logs(path, limits=IngestLimits(max_members=3))


def test_a_directory_with_more_files_than_max_members_is_refused(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"rank{i}.log").write_bytes(LOG.replace(b"rank0", f"rank{i}".encode()))
    assert read_logs(tmp_path, limits=IngestLimits(max_members=20)).ranks == list(range(6))
    with pytest.raises(InputTooLargeError, match="max_members"):
        read_logs(tmp_path, limits=IngestLimits(max_members=3))


def test_batch_max_members_bounds_the_whole_archive(tmp_path: Path) -> None:
    path = tmp_path / "batch.tar"
    path.write_bytes(_tar({f"job{i}/rank0.log": LOG for i in range(5)}))
    jobs = list(discover_jobs(path, limits=BatchLimits(max_members=5)))
    assert [j.id for j in jobs] == [f"job{i}" for i in range(5)] and not any(j.error for j in jobs)
    with pytest.raises(InputTooLargeError, match="max_members"):
        list(discover_jobs(path, limits=BatchLimits(max_members=4)))
    with pytest.raises(InputTooLargeError, match="max_members"):
        list(score_archive(path, batch_limits=BatchLimits(max_members=4)))
