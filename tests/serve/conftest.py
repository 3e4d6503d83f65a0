from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from denpex_ml.serve import ServeConfig, create_app

#: The test server's upload cap: small, so that "too large" is cheap to send.
MAX_UPLOAD = 4 * 1024**2


@dataclass(frozen=True)
class Server:
    url: str
    max_upload: int


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """``denpex-ml serve``'s app under uvicorn on a free loopback port, in a thread."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(config=ServeConfig(max_upload_bytes=MAX_UPLOAD))
    srv = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none", lifespan="off")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield Server(f"http://127.0.0.1:{port}", MAX_UPLOAD)
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
