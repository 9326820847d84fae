"""Screenshot of the web page for the README: the reference design (32 × DGX H100) on
InfiniBand NDR against RoCEv2 400G, collective bandwidth, in headless Chromium.

Usage: python scripts/web_screenshot.py [OUT.png]   (needs the web extra, playwright and
Debian's chromium)
"""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path


def main(out: Path) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    from fabricsim.web.app import create_app
    from fabricsim.web.limits import Limits

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = Path(tempfile.mkdtemp()) / "shot.duckdb"
    server = uvicorn.Server(uvicorn.Config(create_app(store=store, limits=Limits()),
                                           host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium: apt-get install chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        pg = b.new_page(viewport={"width": 1400, "height": 900})
        pg.goto(f"http://127.0.0.1:{port}/")
        pg.wait_for_selector("body[data-ready='1']")
        pg.select_option("#kind", "bench")
        pg.check("#compare")
        pg.wait_for_function("() => document.querySelector('#design-1 .yaml').value"
                             ".includes('roce-400g')")
        pg.wait_for_selector("#design-1 .status.ok")
        pg.click("#run")
        pg.wait_for_selector("#fig-time .main-svg", timeout=120_000)
        pg.wait_for_timeout(800)
        pg.screenshot(path=str(out), full_page=True)
        b.close()
    server.should_exit = True
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images/web.png"))
