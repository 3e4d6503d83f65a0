"""Directories, compressed files and archives; every bad input gets a typed error."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from denpex_ml import errors
from denpex_ml.logs import IngestLimits, read_logs

RANK_FILES = {
    "rank0.log": "[2024-05-01 10:00:00] step 1 loss 2.0\n",
    "rank_1.log": "step 1 loss 2.1\nRuntimeError: CUDA error: an illegal memory access was encountered\n",
    "attempt_0/2/stderr.log": "waiting\n",
    "pods/llm-train-worker-3.log": "Watchdog caught collective operation timeout\n",
}


def make_dir(root: Path) -> Path:
    for name, text in RANK_FILES.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_directory_of_per_rank_files(tmp_path: Path) -> None:
    b = read_logs(make_dir(tmp_path / "job"))
    assert b.ranks == [0, 1, 2, 3]
    assert b.n_lines == 5
    assert sorted(b.sources) == sorted(RANK_FILES)


def test_gzip_file(tmp_path: Path) -> None:
    p = tmp_path / "rank5.log.gz"
    p.write_bytes(gzip.compress(b"hello\nRuntimeError: boom\n"))
    b = read_logs(p)
    assert b.ranks == [5]
    assert [ln.text for ln in b.rank(5).lines] == ["hello", "RuntimeError: boom"]


@pytest.mark.parametrize("fmt", ["tar", "gztar", "bztar", "xztar", "zip"])
def test_archives_read_in_memory(tmp_path: Path, fmt: str) -> None:
    src = make_dir(tmp_path / "job")
    archive = Path(shutil.make_archive(str(tmp_path / "job_archive"), fmt, root_dir=src))
    shutil.rmtree(src)
    before = set(os.listdir(tmp_path))
    b = read_logs(archive)
    assert b.ranks == [0, 1, 2, 3]
    assert set(os.listdir(tmp_path)) == before  # nothing extracted to disk


def test_gz_members_inside_tar(tmp_path: Path) -> None:
    archive = tmp_path / "job.tar"
    with tarfile.open(archive, "w") as tf:
        data = gzip.compress(b"RuntimeError: x\n")
        info = tarfile.TarInfo("rank7.log.gz")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert read_logs(archive).ranks == [7]


def test_mapping_and_text_sources() -> None:
    b = read_logs({0: "ok\n", "3": "boom\n", "worker-5.log": "x\n"})
    assert b.ranks == [0, 3, 5]
    assert read_logs(text="plain line\n").streams.keys() == {"global"}


def test_empty_inputs_give_empty_bundles(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "emptydir").mkdir()
    for src in (tmp_path / "empty.log", tmp_path / "emptydir"):
        b = read_logs(src)
        assert b.is_empty and b.ranks == []
    assert read_logs(text="").is_empty


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(errors.LogNotFoundError, match="no such file") as exc:
        read_logs(tmp_path / "nope.log")
    assert isinstance(exc.value, FileNotFoundError)
    assert "nope.log" in str(exc.value)


def test_binary_file_is_not_a_log(tmp_path: Path) -> None:
    p = tmp_path / "core.bin"
    p.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(errors.NotALogError, match=r"core\.bin"):
        read_logs(p)


def test_binary_member_in_directory_is_skipped_with_warning(tmp_path: Path) -> None:
    job = make_dir(tmp_path / "job")
    (job / "model.pt").write_bytes(b"\x00\x01\x02" * 5000)
    b = read_logs(job)
    assert b.ranks == [0, 1, 2, 3]
    assert any("model.pt" in w and "binary" in w for w in b.warnings)


def test_corrupt_gzip(tmp_path: Path) -> None:
    p = tmp_path / "rank0.log.gz"
    p.write_bytes(gzip.compress(os.urandom(50_000).hex().encode())[:2000])
    with pytest.raises(errors.ArchiveError, match=r"rank0\.log"):
        read_logs(p)


def test_truncated_tar_gz(tmp_path: Path) -> None:
    src = make_dir(tmp_path / "job")
    (src / "big.log").write_bytes(os.urandom(200_000).hex().encode())
    archive = Path(shutil.make_archive(str(tmp_path / "a"), "gztar", root_dir=src))
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(errors.ArchiveError):
        read_logs(archive)


def test_not_an_archive_zip(tmp_path: Path) -> None:
    p = tmp_path / "job.zip"
    p.write_bytes(b"PK\x03\x04" + b"garbage" * 10)
    with pytest.raises(errors.ArchiveError, match=r"job\.zip"):
        read_logs(p)


@pytest.mark.parametrize("name", ["/etc/passwd", "../../evil.log", "a/../../b.log"])
def test_zip_member_paths_are_checked(tmp_path: Path, name: str) -> None:
    p = tmp_path / "bad.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr(name, "x\n")
    with pytest.raises(errors.UnsafeArchiveMemberError, match=r"bad\.zip"):
        read_logs(p)


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_tar_links_and_devices_are_refused(tmp_path: Path, kind: bytes) -> None:
    p = tmp_path / "bad.tar"
    with tarfile.open(p, "w") as tf:
        info = tarfile.TarInfo("rank0.log")
        info.type = kind
        info.linkname = "/etc/shadow"
        tf.addfile(info)
    with pytest.raises(errors.UnsafeArchiveMemberError):
        read_logs(p)


def test_tar_absolute_member(tmp_path: Path) -> None:
    p = tmp_path / "abs.tar"
    with tarfile.open(p, "w") as tf:
        info = tarfile.TarInfo("/tmp/rank0.log")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"x\n"))
    with pytest.raises(errors.UnsafeArchiveMemberError, match="absolute"):
        read_logs(p)


def test_zip_symlink_member(tmp_path: Path) -> None:
    p = tmp_path / "link.zip"
    with zipfile.ZipFile(p, "w") as zf:
        info = zipfile.ZipInfo("rank0.log")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(errors.UnsafeArchiveMemberError, match="link"):
        read_logs(p)


def test_symlink_inside_directory_is_not_followed(tmp_path: Path) -> None:
    job = make_dir(tmp_path / "job")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    (job / "rank9.log").symlink_to(secret)
    b = read_logs(job)
    assert 9 not in b.ranks
    assert "TOPSECRET" not in b.text()
    assert any("rank9.log" in w for w in b.warnings)


def test_gzip_bomb_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "bomb.log.gz"
    with gzip.open(p, "wb", compresslevel=9) as gz:
        chunk = b"A" * (1 << 20)
        for _ in range(64):
            gz.write(chunk)
    limits = IngestLimits(ratio_min_bytes=1 << 20, max_compression_ratio=100)
    with pytest.raises(errors.InputTooLargeError, match="ratio"):
        read_logs(p, limits=limits)


def test_zip_bomb_declared_ratio_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.log", b"\n" * (8 << 20))
    limits = IngestLimits(ratio_min_bytes=1 << 20, max_compression_ratio=100)
    with pytest.raises(errors.InputTooLargeError):
        read_logs(p, limits=limits)


def test_total_size_limit(tmp_path: Path) -> None:
    p = tmp_path / "big.log"
    p.write_text("line of text\n" * 100_000)
    with pytest.raises(errors.InputTooLargeError, match="max_total_bytes"):
        read_logs(p, limits=IngestLimits(max_total_bytes=100_000))


def test_wrong_types() -> None:
    with pytest.raises(errors.InvalidInputError):
        read_logs(12345)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidInputError):
        read_logs()
    with pytest.raises(errors.InvalidInputError):
        read_logs({0: 5})  # type: ignore[dict-item]
    with pytest.raises(TypeError):  # the built-in a caller would catch
        read_logs("a", text="b")


def test_bad_limits() -> None:
    with pytest.raises(errors.InvalidInputError, match="max_line_chars"):
        IngestLimits(max_line_chars=0)


def test_log_not_found_carries_errno_and_filename(tmp_path: Path) -> None:
    import errno
    import pickle

    from denpex_ml.errors import LogNotFoundError
    from denpex_ml.logs import read_logs

    missing = tmp_path / "nope.log"
    with pytest.raises(LogNotFoundError) as info:
        read_logs(missing)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(missing)
    assert str(info.value).endswith("no such file or directory")  # the message, not "[Errno 2] ..."
    again = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries in batch workers
    assert str(again) == str(info.value)
