"""``fabricsim serve``: the web app (the ``web`` extra), on loopback by default."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import console
from fabricsim.errors import ConfigError


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        host: Annotated[str, typer.Option("--host", help="Address to listen on. The default "
                                          "serves this machine only; 0.0.0.0 serves every "
                                          "network it is on (no authentication!).")]
        = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
        store: Annotated[Path, typer.Option("--store", help="DuckDB file keeping jobs and "
                                            "results across restarts.")]
        = Path("fabricsim-web.duckdb"),
        workers: Annotated[int, typer.Option("--workers", help="Jobs run at once (worker "
                                             "processes).")] = 2,
        max_wall: Annotated[float, typer.Option("--max-wall", help="Wall-time budget of one "
                                                "job, seconds.")] = 120.0,
        max_gpus: Annotated[int, typer.Option("--max-gpus", help="Most GPUs of one design "
                                              "(analytic kinds).")] = 16_384,
        quiet: Annotated[bool, typer.Option("--quiet", help="No access log.")] = False,
    ) -> None:
        """Serve the web app: pick or paste a design, run it, compare two, see charts.

        Example: fabricsim serve --port 8000, then open http://127.0.0.1:8000/
        """
        if not 0 < port < 65536:
            raise ConfigError(f"--port must be 1..65535, got {port}", field="--port")
        for name, v in (("--workers", workers), ("--max-wall", max_wall),
                        ("--max-gpus", max_gpus)):
            if not v > 0:
                raise ConfigError(f"{name} must be positive, got {v}", field=name)
        if workers > 64:
            raise ConfigError(f"--workers {workers} is more worker processes than a server "
                              "needs; use at most 64", field="--workers")
        from fabricsim._extras import require

        uvicorn = require("uvicorn", "web", "fabricsim serve")
        import socket

        from fabricsim.web.app import create_app
        from fabricsim.web.limits import Limits
        from fabricsim.web.store import JobStore

        JobStore(store).close()  # a file that is not a job store fails here, clearly
        try:
            with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as e:
            import errno

            if e.errno == errno.EADDRINUSE:
                raise ConfigError(f"cannot listen on {host}:{port}: another program uses "
                                  "it; pick another --port", field="--port") from None
            raise ConfigError(f"cannot listen on {host}:{port} ({e.strerror}): use an "
                              "address of this machine, e.g. 127.0.0.1", field="--host"
                              ) from None
        lim = Limits(workers=workers, max_wall_s=max_wall, max_gpus=max_gpus)
        web = create_app(store=store, limits=lim)
        if host not in ("127.0.0.1", "localhost", "::1"):
            console.print(f"[yellow]warning:[/] serving on {host}: anyone who can reach it "
                          "can run jobs; there is no authentication")
        console.print(f"fabricsim web app: open http://{host}:{port}/  (jobs kept in "
                      f"{store}; Ctrl-C stops)")
        uvicorn.run(web, host=host, port=port, log_level="warning" if quiet else "info",
                    access_log=not quiet)
