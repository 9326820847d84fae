"""Shared set-up of the web app's tests: the app served on a loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the web extra is not installed")



@pytest.fixture()
def served(tmp_path: Path) -> Iterator[str]:
    """The app served by uvicorn on a free loopback port (one worker); its base URL."""
    import uvicorn

    from fabricsim.web.app import create_app
    from fabricsim.web.limits import Limits

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(store=tmp_path / "web.duckdb", limits=Limits(workers=1))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not t.is_alive():
            raise RuntimeError("the web app did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(timeout=30)
