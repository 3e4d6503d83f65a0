"""``denpex-ml serve``: a local page to paste a log or drop files, and ``POST /classify`` for tools.

The app is a small Starlette application (:func:`create_app`). An upload is read into memory
up to ``max_upload_bytes`` (a larger one is refused with 413 before it is parsed; multipart
files over 1 MiB are spooled by Starlette to the system temporary directory and closed with the
response), then given to the library's own reader (:func:`denpex_ml.logs.read_logs`, as a
mapping of file names to bytes: archives and compressed files get the same ingestion limits and
masking as on disk). Nothing is written anywhere else and nothing is kept after the response.

``POST /classify`` answers what ``denpex-ml classify --json`` prints, plus ``timeline`` (per rank,
the last lines before the failure) and ``input`` (files, lines, ranks, warnings). A
:class:`~denpex_ml.errors.DenpexError` is answered ``{"error": {"type", "message"}}`` with status
400 (413 for :class:`~denpex_ml.errors.InputTooLargeError`); any other failure is logged here and
answered 500 without its traceback.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from denpex_ml.errors import DenpexError, DependencyMissingError, InputTooLargeError, InvalidInputError
from denpex_ml.logs.limits import IngestLimits

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from denpex_ml.model.core import DenpexModel

__all__ = ["DEFAULT_LIMITS", "DEFAULT_MAX_UPLOAD", "ServeConfig", "classify_upload", "create_app"]

log = logging.getLogger(__name__)

#: Largest request body accepted (bytes): pasted text and files together, before decompression.
DEFAULT_MAX_UPLOAD = 64 * 1024**2
#: Ingestion limits of an upload: at most 1 GiB once decompressed, 10 000 files.
DEFAULT_LIMITS = IngestLimits(max_total_bytes=1024**3, max_members=10_000)
#: Most bytes of a refused (too large) body read and dropped before the connection is closed.
DRAIN_MAX = 1024**3
#: Most files in one multipart upload.
MAX_FILES = 1_000
#: Name the pasted text gets among uploaded files.
PASTED = "pasted.log"


@dataclass(frozen=True)
class ServeConfig:
    """What the app accepts: the largest request body, ingestion limits, the hosts it answers to."""

    max_upload_bytes: int = DEFAULT_MAX_UPLOAD
    limits: IngestLimits = DEFAULT_LIMITS
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "::1", "[::1]")

    def __post_init__(self) -> None:
        if not isinstance(self.max_upload_bytes, int) or self.max_upload_bytes <= 0:
            raise InvalidInputError(
                f"ServeConfig.max_upload_bytes must be a positive int, got {self.max_upload_bytes!r}"
            )


def _too_large(limit: int) -> InputTooLargeError:
    return InputTooLargeError(
        f"upload is larger than the server's limit of {limit / 1024**2:.1f} MiB "
        "(start `denpex-ml serve` with a larger --max-upload-mb, or classify the file with `denpex-ml classify`)"
    )


def classify_upload(
    model: DenpexModel,
    *,
    text: str | None = None,
    files: Mapping[str, bytes] | None = None,
    limits: IngestLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Diagnose pasted text and/or uploaded files (name -> raw bytes) with the library's reader.

    Returns ``Diagnosis.to_dict()`` plus ``timeline`` and ``input``.

    Raises
    ------
    DenpexError
        Nothing to diagnose, or what the ingestion and the model raise (bad archive, too large,
        not a log...).
    """
    from denpex_ml.logs import read_logs
    from denpex_ml.serve.timeline import rank_timelines

    source: dict[int | str, bytes] = {name: data for name, data in (files or {}).items()}
    if text and text.strip():
        source[_unique(PASTED, source)] = text.encode("utf-8", "replace")
    if not source:
        raise InvalidInputError("nothing to diagnose: paste a log or choose log files / an archive")
    # pasted text alone is read as text; with files it is one more member, read like them
    bundle = read_logs(text=text, limits=limits) if list(source) == [PASTED] else read_logs(source, limits=limits)
    d = model.diagnose(bundle)
    out = d.to_dict()
    out["timeline"] = rank_timelines(bundle, d)
    out["input"] = {
        "files": sorted(bundle.sources) if files else [],
        "lines": bundle.n_lines,
        "ranks": len(bundle.ranks),
        "warnings": list(bundle.warnings),
    }
    return out


def _unique(name: str, taken: Container[object]) -> str:
    if name not in taken:
        return name
    stem, dot, ext = name.rpartition(".")
    base, suffix = (stem, dot + ext) if dot else (name, "")
    i = 2
    while f"{base}-{i}{suffix}" in taken:
        i += 1
    return f"{base}-{i}{suffix}"


def _error(exc: DenpexError) -> Response:
    from starlette.responses import JSONResponse

    from denpex_ml.logs.masking import Masker

    status = 413 if isinstance(exc, InputTooLargeError) else 400
    # messages name inputs (member names): masked like log text, as the CLI does
    body = {"error": {"type": type(exc).__name__, "message": Masker().mask(str(exc))}}
    return JSONResponse(body, status_code=status)


async def _capped_body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes. A larger one is read to its end and dropped
    (up to :data:`DRAIN_MAX`, so that the client reads the 413 instead of a reset connection)."""
    declared = request.headers.get("content-length")
    too_big = declared is not None and declared.isdigit() and int(declared) > limit
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        too_big = too_big or size > limit
        if too_big:
            chunks.clear()
            if size > DRAIN_MAX:
                break
            continue
        chunks.append(chunk)
    if too_big:
        raise _too_large(limit)
    return b"".join(chunks)


async def _read_upload(request: Request, body: bytes) -> tuple[str | None, dict[str, bytes]]:
    """``(text, files)`` from a JSON, multipart or plain-text body."""
    from starlette.exceptions import HTTPException
    from starlette.formparsers import MultiPartException
    from starlette.requests import Request as _Request

    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            data = json.loads(body or b"null")
        except (ValueError, RecursionError) as exc:
            raise InvalidInputError(f"request body is not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("text", ""), str):
            raise InvalidInputError('JSON body must be an object {"text": "<log text>"}')
        logs = data.get("logs") or {}
        if not isinstance(logs, dict) or not all(isinstance(v, str) for v in logs.values()):
            raise InvalidInputError('"logs" must map a rank or file name to its text')
        return data.get("text"), {str(k): v.encode("utf-8", "replace") for k, v in logs.items()}
    if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.request", "body": b"", "more_body": False}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        text: str | None = None
        files: dict[str, bytes] = {}
        try:
            async with _Request(request.scope, replay).form(max_files=MAX_FILES, max_part_size=len(body) + 1) as form:
                for key, value in form.multi_items():
                    if isinstance(value, str):
                        if key == "text":
                            text = value
                        continue
                    data = await value.read()
                    if not data and not value.filename:
                        continue  # an empty file input
                    files[_unique(value.filename or "upload", files)] = data
        except MultiPartException as exc:
            raise InvalidInputError(f"malformed upload: {exc.message}") from None
        except (ValueError, HTTPException) as exc:  # parse errors of python-multipart, as Starlette raises them
            raise InvalidInputError(f"malformed multipart upload ({getattr(exc, 'detail', exc)})") from None
        return text, files
    if ctype in ("", "text/plain", "application/octet-stream"):
        return body.decode("utf-8", "replace"), {}
    raise InvalidInputError(
        f"unsupported content type {ctype!r}: send multipart/form-data (files, text), "
        'application/json ({"text": ...}) or text/plain'
    )


def create_app(model: DenpexModel | None = None, config: ServeConfig | None = None) -> Starlette:
    """The Starlette app of ``denpex-ml serve``: ``GET /`` (the page), ``POST /classify`` (JSON),
    ``GET /health``. ``model`` defaults to the shipped model, loaded on the first request."""
    try:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.middleware import Middleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.responses import HTMLResponse, JSONResponse
        from starlette.routing import Route
    except ImportError:  # pragma: no cover - starlette comes with the serve extra
        raise DependencyMissingError("denpex-ml serve needs Starlette: pip install 'denpex-ml[serve]'") from None

    cfg = config or ServeConfig()
    lock = threading.Lock()  # one diagnosis at a time: a local page, and the model is shared
    state: dict[str, DenpexModel] = {}

    def get_model() -> DenpexModel:
        if "model" not in state:
            from denpex_ml.model.core import default_model

            state["model"] = model if model is not None else default_model()
        return state["model"]

    def diagnose(text: str | None, files: dict[str, bytes]) -> dict[str, Any]:
        with lock:
            return classify_upload(get_model(), text=text, files=files, limits=cfg.limits)

    async def page(request: Request) -> Response:
        from denpex_ml.serve.page import render_page

        nonce = secrets.token_urlsafe(16)
        html = render_page(nonce=nonce, max_upload_bytes=cfg.max_upload_bytes)
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(html, headers={"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff"})

    async def classify(request: Request) -> Response:
        try:
            body = await _capped_body(request, cfg.max_upload_bytes)
            text, files = await _read_upload(request, body)
            del body
            result = await run_in_threadpool(diagnose, text, files)
        except DenpexError as exc:
            return _error(exc)
        except Exception:
            log.exception("POST /classify failed")
            return JSONResponse(
                {
                    "error": {
                        "type": "InternalError",
                        "message": "internal error while diagnosing; see the server's log",
                    }
                },
                status_code=500,
            )
        return JSONResponse(result, headers={"Cache-Control": "no-store"})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "max_upload_bytes": cfg.max_upload_bytes})

    hosts = list(cfg.allowed_hosts)
    return Starlette(
        debug=False,
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/classify", classify, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        # answers only to the names it is served under: a web page elsewhere cannot reach it by DNS rebinding
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
    )
