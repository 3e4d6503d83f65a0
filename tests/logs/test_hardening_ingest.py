"""Hostile inputs to ingestion (issue 16): decompression budgets, undecodable names,
binary sniffing, line endings, empty paths and streamed standard input.

Every hostile file is generated here, in ``tmp_path``, by streaming: a bomb is one small
compressed chunk written many times (concatenated gzip/bzip2/xz streams are valid), so
neither the test nor its fixtures hold the uncompressed bytes. Costs are asserted as bytes
produced before refusal (deterministic) or as peak memory, never as wall-clock time.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import random
import subprocess
import sys
import tarfile
import textwrap
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import denpex_ml
from denpex_ml import errors
from denpex_ml.logs import IngestLimits, read_logs
from denpex_ml.logs.normalize import iter_text_blocks, looks_binary, sniff_encoding
from denpex_ml.logs.readers import read_stream
from denpex_ml.logs.sources import ReadBudget, display_name, iter_members, opened
from denpex_ml.model.core import DenpexModel

MiB = 1 << 20
ERROR_LINE = b"[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"


# -- generators (streamed: the uncompressed bytes never exist) ---------------------------------
def _tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _tar_end(size: int) -> bytes:
    return b"\0" * (-size % 512) + b"\0" * 1024


def _repeat(path: Path, first: bytes, chunk: bytes, times: int, last: bytes = b"") -> Path:
    with path.open("wb") as fh:
        fh.write(first)
        for _ in range(times):
            fh.write(chunk)
        fh.write(last)
    return path


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, 9)


def _newlines_gz(size: int, chunk: int = 8 * MiB) -> bytes:
    """gzip of ``size`` newlines as concatenated members (about 1 KB per MiB)."""
    return _gz(b"\n" * chunk) * (size // chunk)


def _compressed_tar(path: Path, compress: Callable[[bytes], bytes], size: int, chunk: int = 8 * MiB) -> Path:
    body = compress(b"\n" * chunk)
    return _repeat(path, compress(_tar_header("rank0.log", size)), body, size // chunk, compress(_tar_end(size)))


def _single_stream_tgz(path: Path, size: int) -> Path:
    """One gzip stream (as ``tar czf`` writes it), compressed chunk by chunk."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\n" * MiB
    with path.open("wb") as fh:
        fh.write(comp.compress(_tar_header("rank0.log", size)))
        for _ in range(size // MiB):
            fh.write(comp.compress(chunk))
        fh.write(comp.compress(_tar_end(size)))
        fh.write(comp.flush())
    return path


def _tar_with(path: Path, members: dict[str, bytes], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tf:  # type: ignore[call-overload]
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _deflated_zip_bomb(size: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("rank0.log", "w", force_zip64=True) as w:
        chunk = b"\n" * (8 * MiB)
        for _ in range(size // len(chunk)):
            w.write(chunk)
    return buf.getvalue()


def _bomb_gz(p: Path, size: int) -> Path:
    return _repeat(p / "bomb.log.gz", b"", _gz(b"\n" * (8 * MiB)), size // (8 * MiB))


def _bomb_bz2(p: Path, size: int) -> Path:
    return _repeat(p / "bomb.log.bz2", b"", bz2.compress(b"\n" * (8 * MiB)), size // (8 * MiB))


def _bomb_tgz(p: Path, size: int) -> Path:
    return _compressed_tar(p / "bomb.tar.gz", _gz, size)


def _bomb_tgz_one_stream(p: Path, size: int) -> Path:
    return _single_stream_tgz(p / "bomb1.tgz", min(size, 64 * MiB))


def _bomb_tbz2(p: Path, size: int) -> Path:
    return _compressed_tar(p / "bomb.tar.bz2", bz2.compress, 4 * size)


def _bomb_txz(p: Path, size: int) -> Path:
    return _compressed_tar(p / "bomb.tar.xz", lzma.compress, size)


def _bomb_gz_in_tar(p: Path, size: int) -> Path:
    return _tar_with(p / "gz-in.tar", {"job/rank0.log.gz": _newlines_gz(size)})


def _bomb_tar_in_tgz(p: Path, size: int) -> Path:
    inner = 512 + size + len(_tar_end(size))
    first = _gz(_tar_header("job/inner.tar", inner) + _tar_header("rank0.log", size))
    return _repeat(p / "nested.tar.gz", first, _gz(b"\n" * MiB), size // MiB, _gz(_tar_end(size) + _tar_end(inner)))


def _bomb_tgz_in_tar(p: Path, size: int) -> Path:
    inner = _compressed_tar(p / "inner.tar.gz", _gz, size)
    return _tar_with(p / "outer.tar", {"job/inner.tar.gz": inner.read_bytes()})


def _bomb_gz_in_zip(p: Path, size: int) -> Path:
    with zipfile.ZipFile(p / "gz-in.zip", "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("rank0.log.gz", _newlines_gz(size))
    return p / "gz-in.zip"


def _bomb_zip(p: Path, size: int) -> Path:
    (p / "bomb.zip").write_bytes(_deflated_zip_bomb(min(size, 64 * MiB)))
    return p / "bomb.zip"


def _bomb_zip_in_tgz(p: Path, size: int) -> Path:
    return _tar_with(p / "zip-in.tar.gz", {"job/logs.zip": _deflated_zip_bomb(min(size, 64 * MiB))}, "w:gz")


def _bomb_gz_gz(p: Path, size: int) -> Path:
    """Compression applied twice: each layer alone stays near the limit, together far above."""
    (p / "twice.log.gz.gz").write_bytes(_gz(_newlines_gz(size)))
    return p / "twice.log.gz.gz"


BOMBS: dict[str, Callable[[Path, int], Path]] = {
    "gz": _bomb_gz,
    "bz2": _bomb_bz2,
    "tar.gz": _bomb_tgz,
    "tar.gz-one-stream": _bomb_tgz_one_stream,
    "tar.bz2": _bomb_tbz2,
    "tar.xz": _bomb_txz,
    "gz-in-tar": _bomb_gz_in_tar,
    "tar-in-tar.gz": _bomb_tar_in_tgz,
    "tar.gz-in-tar": _bomb_tgz_in_tar,
    "gz-in-zip": _bomb_gz_in_zip,
    "zip": _bomb_zip,
    "zip-in-tar.gz": _bomb_zip_in_tgz,
    "gz.gz": _bomb_gz_gz,
}


def _produced_before_refusal(path: Path, limits: IngestLimits | None = None) -> int:
    """Bytes produced (all decompressors together) when ``path`` is refused."""
    limits = limits or IngestLimits()
    budget = ReadBudget(limits, str(path))
    with pytest.raises(errors.InputTooLargeError, match="ratio"):
        for member in iter_members(path, limits, budget):
            with opened(member) as stream:
                while stream.read(1 << 16):
                    pass
    return budget.read


# -- 1. decompression budgets ---------------------------------------------------------------
@pytest.mark.parametrize("kind", list(BOMBS))
def test_bombs_are_refused_after_a_few_megabytes(tmp_path: Path, kind: str) -> None:
    path = BOMBS[kind](tmp_path, 1 << 30)
    with pytest.raises(errors.InputTooLargeError, match="ratio") as info:
        read_logs(path)
    assert path.name in str(info.value)
    # the cost is what was decompressed before the refusal: a few MiB of a 1-4 GiB bomb
    assert _produced_before_refusal(path) <= 3 * MiB


@pytest.mark.parametrize("kind", ["gz", "tar.gz", "tar.bz2", "gz-in-tar", "tar-in-tar.gz", "gz.gz"])
def test_refusal_cost_does_not_grow_with_the_bomb(tmp_path: Path, kind: str) -> None:
    small = BOMBS[kind](tmp_path / _mkdir(tmp_path, "small"), 64 * MiB)
    large = BOMBS[kind](tmp_path / _mkdir(tmp_path, "large"), 1 << 30)
    assert _produced_before_refusal(large) <= _produced_before_refusal(small) + MiB


def _mkdir(base: Path, name: str) -> str:
    (base / name).mkdir()
    return name


def _spam(n_lines: int) -> bytes:
    """A legitimate but repetitive log: a warning per rank per step, a loss line per step."""
    out = []
    for i in range(n_lines):
        out.append(
            f"[rank{i % 8}]:/usr/lib/python3/site-packages/torch/autograd/__init__.py:251: UserWarning: "
            "Grad strides do not match bucket view strides.\n"
        )
        if i % 8 == 0:
            out.append(f"[rank0]: step {i // 8} loss {(i * 7919) % 30000 / 10000:.4f} lr 1.0e-04\n")
    return "".join(out).encode() + ERROR_LINE


@pytest.mark.parametrize("suffix", ["tar.gz", "tar.bz2", "tar.xz", "log.gz", "log.bz2", "log.xz", "zip"])
def test_repetitive_legitimate_logs_are_accepted(tmp_path: Path, suffix: str) -> None:
    data = _spam(20_000)  # about 2.7 MB; gzip ~90x, bzip2 ~200x, xz ~170x
    path = tmp_path / f"job.{suffix}"
    if suffix.startswith("tar"):
        _tar_with(path, {"job/rank0.log": data}, f"w:{suffix.split('.')[1]}")
    elif suffix == "zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            zf.writestr("job/rank0.log", data)
    else:
        opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[suffix.split(".")[1]]
        with opener(path, "wb") as fh:  # type: ignore[operator]
            fh.write(data)
    bundle = read_logs(path)
    assert bundle.n_lines == data.count(b"\n")
    assert "illegal memory access" in bundle.text()


def test_a_tar_inside_a_tar_gz_is_streamed(tmp_path: Path) -> None:
    """The inner tar (48 MiB of text) is read from inside the outer one, never whole."""
    size = 48 * MiB
    text = "".join(
        f"[rank0]: step {i} loss {(i * 7919) % 10007 / 1000:.4f} grad_norm {i % 97 / 10}\n" for i in range(30_000)
    )
    chunk = text.encode()[: MiB - 1] + b"\n"  # varied lines: gzip ~10x
    inner = 512 + size + len(_tar_end(size))
    first = _gz(_tar_header("job/inner.tar", inner) + _tar_header("rank0.log", size))
    path = _repeat(tmp_path / "nested.tar.gz", first, _gz(chunk), size // MiB, _gz(_tar_end(size) + _tar_end(inner)))
    limits = IngestLimits()
    budget = ReadBudget(limits, "nested")
    tracemalloc.start()
    try:
        read = 0
        names = []
        for member in iter_members(path, limits, budget):
            names.append(member.name)
            with opened(member) as stream:
                while block := stream.read(1 << 16):
                    read += len(block)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert names == ["nested.tar.gz/job/inner.tar/rank0.log"]
    assert read == size
    assert peak < 8 * MiB, f"peak {peak} bytes: the inner tar was read into memory"


def test_a_zip_inside_a_tar_gz_is_read(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank3.log", ERROR_LINE.replace(b"rank0", b"rank3"))
    path = _tar_with(tmp_path / "job.tar.gz", {"job/logs.zip": buf.getvalue()}, "w:gz")
    bundle = read_logs(path)
    assert bundle.ranks == [3]
    assert bundle.sources == ["job.tar.gz/job/logs.zip/rank3.log"]


def test_bz2_and_xz_logs_and_archives_are_read(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    with bz2.open(tmp_path / "job" / "rank1.log.bz2", "wb") as fh:
        fh.write(ERROR_LINE.replace(b"rank0", b"rank1"))
    with lzma.open(tmp_path / "job" / "rank2.log.xz", "wb") as fh:
        fh.write(b"[rank2]: step 1\n")
    assert read_logs(tmp_path / "job").ranks == [1, 2]
    assert read_logs(tmp_path / "job").sources == ["rank1.log", "rank2.log"]


def test_limits_are_configurable_for_unusually_compressible_logs(tmp_path: Path) -> None:
    path = tmp_path / "same-line.log.xz"
    with lzma.open(path, "wb") as fh:
        for _ in range(4):
            fh.write(ERROR_LINE * 20_000)  # the same line 80,000 times: xz ~6000x
    with pytest.raises(errors.InputTooLargeError, match="max_compression_ratio"):
        read_logs(path)
    assert read_logs(path, limits=IngestLimits(max_compression_ratio=100_000)).n_lines == 80_000


def test_total_size_counts_decompressed_bytes(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(_gz(ERROR_LINE * 30_000))  # 2.3 MB inside, 20 KB on disk
    with pytest.raises(errors.InputTooLargeError, match="max_total_bytes"):
        read_logs(path, limits=IngestLimits(max_total_bytes=MiB, max_compression_ratio=10_000))


def test_truncated_and_corrupt_streams_are_archive_errors(tmp_path: Path) -> None:
    good = _gz(ERROR_LINE * 1000)
    (tmp_path / "cut.log.gz").write_bytes(good[: len(good) // 2])
    bad = bytearray(good)
    bad[-8] ^= 0xFF  # the CRC of the gzip trailer
    (tmp_path / "crc.log.gz").write_bytes(bytes(bad))
    (tmp_path / "cut.tar.xz").write_bytes(lzma.compress(_tar_header("a.log", 10) + b"x" * 10)[:-30])
    for name in ("cut.log.gz", "crc.log.gz", "cut.tar.xz"):
        with pytest.raises(errors.ArchiveError, match=name.split(".")[0]):
            read_logs(tmp_path / name)


def test_concatenated_gzip_members_and_padding_are_read(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log.gz"
    path.write_bytes(_gz(b"[rank0]: step 1\n") + _gz(ERROR_LINE) + b"\0" * 100)
    bundle = read_logs(path)
    assert bundle.n_lines == 2
    assert "illegal memory access" in bundle.text()


# -- 2. names that are not UTF-8 --------------------------------------------------------------
BAD = os.fsdecode(b"r\xff.log")  # 'r\udcff.log'


def _non_utf8_sources(tmp_path: Path) -> dict[str, Path]:
    job = tmp_path / "job"
    job.mkdir()
    (job / BAD).write_bytes(ERROR_LINE)
    tar = _tar_with(tmp_path / "job.tar", {BAD: ERROR_LINE})
    zpath = tmp_path / "job.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("rX.log", ERROR_LINE)
    zpath.write_bytes(zpath.read_bytes().replace(b"rX.log", b"r\xff.log"))  # raw bytes, no UTF-8 flag
    return {"directory": job, "tar": tar, "zip": zpath}


def _assert_safe(text: str) -> None:
    text.encode("utf-8")  # no lone surrogate
    assert "\x1b" not in text
    assert "\udcff" not in text


def test_names_that_are_not_utf8_are_read_and_shown_escaped(tmp_path: Path) -> None:
    for kind, path in _non_utf8_sources(tmp_path).items():
        bundle = read_logs(path)
        assert bundle.ranks == [0], kind
        assert len(bundle.sources) == 1
        _assert_safe(json.dumps(bundle.summary(), ensure_ascii=False))
        _assert_safe(bundle.sources[0])
        _assert_safe(bundle.text())
        if kind != "zip":  # zip names without the UTF-8 flag are cp437: every byte is a character
            assert bundle.sources[0].endswith("r\\xff.log")


def test_names_that_are_not_utf8_through_classify(tmp_path: Path, tiny_model: DenpexModel) -> None:
    for kind, path in _non_utf8_sources(tmp_path).items():
        diagnosis = denpex_ml.classify(path, model=tiny_model)
        _assert_safe(json.dumps(diagnosis.to_dict(), ensure_ascii=False))
        _assert_safe(diagnosis.summary())
        assert diagnosis.label, kind


def test_zip_name_flagged_utf8_but_invalid_is_an_archive_error(tmp_path: Path) -> None:
    path = tmp_path / "flagged.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("r\u00ff.log", ERROR_LINE)  # non-ASCII: written as UTF-8 with the flag set
    path.write_bytes(path.read_bytes().replace("r\u00ff".encode(), b"r\xff\xfe"))
    with pytest.raises(errors.ArchiveError, match="not valid UTF-8"):
        read_logs(path)


def test_control_characters_in_names_are_escaped_in_errors_and_sources(tmp_path: Path) -> None:
    evil = "job/\x1b[2J\rrank0.log"
    bundle = read_logs(_tar_with(tmp_path / "a.tar", {evil: ERROR_LINE}))
    assert bundle.sources == ["a.tar/job/\\x1b[2J\\rrank0.log"]
    with pytest.raises(errors.UnsafeArchiveMemberError) as info:
        read_logs(_tar_with(tmp_path / "b.tar", {"../\x1b[2J" + BAD: ERROR_LINE}))
    _assert_safe(str(info.value))
    assert "\\x1b[2J" in str(info.value) and "\\xff" in str(info.value)


def test_mapping_keys_with_surrogates() -> None:
    texts: dict[int | str, str] = {BAD: ERROR_LINE.decode()}
    assert read_logs(texts).sources == ["r\\xff.log"]
    raw: dict[int | str, bytes] = {"b\udcfe.log.gz": _gz(ERROR_LINE)}
    assert read_logs(raw).sources == ["b\\xfe.log"]


def test_display_name() -> None:
    assert display_name("plain name.log") == "plain name.log"
    assert display_name(BAD) == "r\\xff.log"
    assert display_name("a\tb\nc\x7f\ud800") == "a\\tb\\nc\\x7f\\ud800"


# -- 3. binary sniffing, encodings, line endings, empty paths ---------------------------------
def test_random_bytes_are_never_a_log(tmp_path: Path) -> None:
    accepted = []
    for i in range(300):
        path = tmp_path / f"r{i}.log"
        path.write_bytes(random.Random(i).randbytes(50_000))
        try:
            read_logs(path)
            accepted.append(i)
        except errors.NotALogError:
            pass
    assert accepted == []


@pytest.mark.parametrize("method", [0, 7, 9, 255])
def test_gzips_magic_without_deflate_is_not_taken_for_gzip(tmp_path: Path, method: int) -> None:
    # 1f 8b begins one random file in 65,536; gzip's third byte is always 8 (deflate)
    path = tmp_path / "r.log"
    path.write_bytes(b"\x1f\x8b" + bytes([method]) + random.Random(method).randbytes(50_000))
    with pytest.raises(errors.NotALogError):
        read_logs(path)


def test_gzips_magic_with_garbage_after_it_is_a_corrupt_archive(tmp_path: Path) -> None:
    path = tmp_path / "r.log"
    path.write_bytes(b"\x1f\x8b\x08" + random.Random(1).randbytes(50_000))
    with pytest.raises(errors.ArchiveError):
        read_logs(path)


def test_random_member_of_a_job_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "rank0.log").write_bytes(ERROR_LINE)
    (tmp_path / "job" / "core.bin").write_bytes(random.Random(446).randbytes(50_000))
    bundle = read_logs(tmp_path / "job")
    assert bundle.ranks == [0]
    assert any("core.bin" in w and "binary" in w for w in bundle.warnings)


@pytest.mark.parametrize(
    "text",
    [
        "Ошибка CUDA: недостаточно памяти на узле 3\n" * 200,  # cp1251: invalid UTF-8, no control bytes
        "Größe überschritten, Fehler bei Schritt 10\n" * 200,
    ],
)
def test_legacy_8bit_text_is_still_text(text: str) -> None:
    data = text.encode("cp1251" if "Ош" in text else "latin-1")
    assert not looks_binary(data[:8192])


def test_ff_fe_is_utf16_only_when_it_decodes_as_text(tmp_path: Path) -> None:
    utf16 = codecs.BOM_UTF16_LE + ERROR_LINE.decode().encode("utf-16-le") * 50
    assert sniff_encoding(utf16) == "utf-16"
    (tmp_path / "u16.log").write_bytes(utf16)
    assert "illegal memory access" in read_logs(tmp_path / "u16.log").text()
    for i in range(20):
        noise = codecs.BOM_UTF16_LE + random.Random(470).randbytes(50_000)
        assert sniff_encoding(noise[:8192]) == "utf-8"
        (tmp_path / f"n{i}.log").write_bytes(noise)
        with pytest.raises(errors.NotALogError):
            read_logs(tmp_path / f"n{i}.log")
    private_use = codecs.BOM_UTF16_LE + "".join(chr(0xE000 + i % 6000) for i in range(3000)).encode("utf-16-le")
    assert sniff_encoding(private_use) == "utf-8"


def test_lone_cr_line_endings_keep_every_line(tmp_path: Path) -> None:
    path = tmp_path / "mac.log"
    path.write_bytes(b"[rank0]: step 1\r[rank1]: step 1\r" + ERROR_LINE.rstrip(b"\n") + b"\r[rank0]: exiting\r")
    bundle = read_logs(path)
    assert bundle.n_lines == 4
    assert bundle.ranks == [0, 1]
    assert "illegal memory access" in bundle.text()


def test_cr_inside_lf_lines_is_still_a_progress_bar(tmp_path: Path) -> None:
    path = tmp_path / "bar.log"
    path.write_bytes(b"[rank0]:  10%|#  | 1/10\r[rank0]: 100%|###| 10/10\n" + ERROR_LINE)
    bundle = read_logs(path)
    assert bundle.n_lines == 2
    assert "10/10" in bundle.text() and "1/10" not in bundle.text().replace("10/10", "")


def test_cr_line_endings_across_block_boundaries() -> None:
    data = b"ab\rcd\r\nef\rgh\r"  # CR-ended from the first line; a CRLF later on, cut anywhere
    for block in (1, 2, 3, 4, 5):
        text = "".join(iter_text_blocks(io.BytesIO(data), name="x", max_line_chars=100, block_chars=block))
        assert text.split("\n")[:-1] == ["ab", "cd", "ef", "gh"], block


def test_an_empty_path_is_not_the_current_directory(tiny_model: DenpexModel) -> None:
    with pytest.raises(errors.LogNotFoundError, match="empty path"):
        read_logs("")
    with pytest.raises(errors.LogNotFoundError, match="empty path"):
        denpex_ml.classify("", model=tiny_model)


def test_iter_members_refuses_an_empty_path() -> None:
    with pytest.raises(errors.LogNotFoundError):
        next(iter_members("", IngestLimits()))


# -- 4. streams and standard input ------------------------------------------------------------
@pytest.mark.parametrize("wrap", ["plain", "gzip", "xz", "tar.gz", "zip"])
def test_read_stream_plain_compressed_and_archives(wrap: str) -> None:
    data = b"[rank1]: step 1\n" + ERROR_LINE
    payload = {
        "plain": lambda: data,
        "gzip": lambda: _gz(data),
        "xz": lambda: lzma.compress(data),
        "tar.gz": lambda: _tar_bytes({"job/rank0.log": data}),
        "zip": lambda: _zip_bytes({"job/rank0.log": data}),
    }[wrap]()
    stream = io.BytesIO(payload)
    bundle = read_stream(stream)
    assert not stream.closed  # the caller's stream
    assert bundle.ranks == [0, 1]
    assert "illegal memory access" in bundle.text()


def _tar_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_read_stream_refuses_a_bomb_and_binary() -> None:
    with pytest.raises(errors.InputTooLargeError, match="<stdin>"):
        read_stream(io.BytesIO(_newlines_gz(1 << 30)))
    with pytest.raises(errors.NotALogError):
        read_stream(io.BytesIO(random.Random(555).randbytes(50_000)))


_CHILD = textwrap.dedent(
    """
    import resource, sys
    from denpex_ml.logs.readers import read_stream
    b = read_stream(sys.stdin.buffer)
    print(b.n_lines, b.n_truncated_lines, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def _stream_to_child(chunks: Iterator[bytes]) -> tuple[int, int, int]:
    """Run :func:`read_stream` on stdin in a child; returns (lines, truncated lines, peak RSS KiB)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None
    assert proc.stdout is not None and proc.stderr is not None
    try:
        for chunk in chunks:
            proc.stdin.write(chunk)
    except BrokenPipeError:  # pragma: no cover - the child died; its stderr says why
        pass
    finally:
        proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, err.decode(errors="replace")
    lines, truncated, rss = (int(x) for x in out.split())
    return lines, truncated, rss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB is Linux's")
def test_stdin_without_newlines_is_streamed_in_flat_memory() -> None:
    _, _, base = _stream_to_child(iter([ERROR_LINE]))
    block = b"a" * MiB
    lines, truncated, peak = _stream_to_child(block for _ in range(256))  # 256 MiB, no newline
    assert (lines, truncated) == (1, 1)
    # reading it whole would take 256 MiB of bytes plus its decoded text
    assert peak - base < 64 * 1024, f"peak RSS {peak} KiB vs {base} KiB for a one-line input"


def test_cli_classify_reads_stdin_as_a_stream(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from denpex_ml import cli
    from denpex_ml.cli import console

    model = ["--model", str(tiny_model_dir)]
    stream = io.BytesIO(_gz(b"[rank1]: step 1\n" + ERROR_LINE))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stream))
    assert cli.main(["classify", "-", "--json", *model]) == console.EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["label"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_newlines_gz(1 << 30))))
    assert cli.main(["classify", "-", *model]) == console.EXIT_INPUT_ERROR
    assert "decompression ratio" in capsys.readouterr().err


def test_log_text_passed_as_source_is_a_typed_error_that_points_to_text() -> None:
    log = "[rank6]: RuntimeError: CUDA error: an illegal memory access was encountered\n" * 40
    with pytest.raises(errors.InvalidInputError, match="text="):
        denpex_ml.read_logs(log)


def test_a_path_too_long_for_the_file_system_is_log_not_found() -> None:
    with pytest.raises(errors.LogNotFoundError) as info:
        denpex_ml.read_logs("x" * 5000)
    assert info.value.errno is not None


def test_launcher_lines_in_a_file_named_for_a_rank_belong_to_no_rank(tmp_path: Path) -> None:
    log = tmp_path / "job-rank5.log"
    log.write_text(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4100 closing signal SIGTERM\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 3 (pid: 4103) of "
        "binary: /usr/bin/python3\n"
        "[2026-01-01 10:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4103\n"
        "step 4 loss 0.9\n",
        encoding="utf-8",
    )
    b = denpex_ml.read_logs(log)
    assert [ln.text for ln in b.streams[5].lines] == ["step 4 loss 0.9"]  # the file's own rank keeps its lines
    glob = [ln.text for ln in b.streams["global"].lines]
    assert len(glob) == 3 and all("elastic" in t or "launch.py" in t for t in glob)
    assert b.streams[5].n_lines == 1 and b.streams["global"].n_lines == 3
