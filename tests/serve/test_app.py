"""``POST /classify`` and the page, over real HTTP (uvicorn on a loopback port)."""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from denpex_ml.cli import build_parser
from denpex_ml.errors import InvalidInputError
from denpex_ml.serve import ServeConfig, classify_upload
from denpex_ml.serve.timeline import rank_timelines

from .conftest import Server

OOM = (
    "[rank0]: step 10 loss 1.23\n"
    "[rank1]: step 10 loss 1.25\n"
    "[rank1]: Traceback (most recent call last):\n"
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total)\n"
    "[rank0]: [E ProcessGroupNCCL.cpp:916] [Rank 0] Watchdog caught collective operation timeout\n"
)


def _post(url: str, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url + "/classify", data=body, headers={"Content-Type": ctype, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def _multipart(fields: dict[str, str], files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
    for name, data in files:
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
        )
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def _targz(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_json_text_gives_the_diagnosis_and_timeline(server: Server) -> None:
    status, d = _post(server.url, json.dumps({"text": OOM}).encode(), "application/json")
    assert status == 200, d
    assert d["label"] == "cuda-oom" and d["initiating_rank"] == 1
    assert any("CUDA out of memory" in ev["text"] for ev in d["evidence"])
    assert d["root_cause"] and d["fix"] and d["confirm"]  # what `classify --json` prints...
    first = d["timeline"]["ranks"][0]  # ...plus each rank's last lines, the failing rank first
    assert first["rank"] == 1 and first["lines"][-1]["evidence"]
    assert d["input"]["ranks"] == 2


def test_files_and_archives_are_read_like_files_on_disk(server: Server) -> None:
    body, ctype = _multipart(
        {"text": ""},
        [("job.tar.gz", _targz({"job/rank0.log": "step 1 ok\n", "job/rank1.log": OOM.replace("[rank1]: ", "")}))],
    )
    status, d = _post(server.url, body, ctype)
    assert status == 200, d
    assert d["label"] == "cuda-oom"
    assert any("rank1.log" in f for f in d["input"]["files"])


def test_bad_upload_answers_the_denpex_error(server: Server) -> None:
    body, ctype = _multipart({}, [("model.bin", b"\x00\x01\x02\x7f" * 500)])
    status, d = _post(server.url, body, ctype)
    assert status == 400 and d["error"]["type"] == "NotALogError"
    assert "Traceback" not in json.dumps(d)
    status, d = _post(server.url, *_multipart({}, [("x.tar.gz", b"\x1f\x8b\x08" + b"junk" * 50)]))
    assert status == 400 and d["error"]["type"] in ("ArchiveError", "NotALogError"), d
    status, d = _post(server.url, b"--x\r\nnonsense", "multipart/form-data; boundary=y")
    assert status == 400 and d["error"]["type"] == "InvalidInputError", d
    status, d = _post(server.url, b"{not json", "application/json")
    assert status == 400 and d["error"]["type"] == "InvalidInputError"
    status, d = _post(server.url, b"", "text/plain")
    assert status == 400 and "nothing to diagnose" in d["error"]["message"]
    status, d = _post(server.url, b"<x/>", "application/xml")
    assert status == 400 and "unsupported content type" in d["error"]["message"]


def test_oversize_upload_is_refused(server: Server) -> None:
    big = b"[rank0]: step 1 loss 1.0\n" * (server.max_upload // 24 + 10)
    status, d = _post(server.url, big, "text/plain")
    assert status == 413 and d["error"]["type"] == "InputTooLargeError"
    assert "limit of 4.0 MiB" in d["error"]["message"]


def test_nothing_is_kept_after_the_answer(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # multipart files over 1 MiB are spooled to the temporary directory: closed and gone after the answer
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    body, ctype = _multipart({}, [("big.log", (OOM * 12_000).encode())])
    assert len(body) > 1024**2
    status, d = _post(server.url, body, ctype)
    assert status == 200, d
    assert list(tmp_path.iterdir()) == []


def test_page_and_host_check(server: Server) -> None:
    with urllib.request.urlopen(server.url + "/", timeout=30) as r:
        html = r.read().decode()
        csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert 'id="log"' in html and 'id="files"' in html
    req = urllib.request.Request(server.url + "/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    with err.value:
        assert err.value.code == 400


def test_classify_upload_directly() -> None:
    from denpex_ml.logs import read_logs
    from denpex_ml.model.core import default_model

    model = default_model()
    d = classify_upload(model, files={"0": b"step 1\n", "1": OOM.replace("[rank1]: ", "").encode()})
    assert d["label"] == "cuda-oom"
    with pytest.raises(InvalidInputError, match="nothing to diagnose"):
        classify_upload(model, text="   ")
    bundle = read_logs(text=OOM)
    t = rank_timelines(bundle, model.diagnose(bundle), per_rank=2, max_ranks=1)
    assert t["more"] == 1 and len(t["ranks"][0]["lines"]) == 2 and t["ranks"][0]["lines"][-1]["evidence"]
    with pytest.raises(InvalidInputError):
        ServeConfig(max_upload_bytes=0)


def test_cli_parses_serve() -> None:
    args = build_parser().parse_args(["serve", "--port", "0", "--max-upload-mb", "2"])
    assert args.host == "127.0.0.1" and args.port == 0 and args.max_upload_mb == 2.0
