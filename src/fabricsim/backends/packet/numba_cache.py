"""Keep numba's on-disk cache of the packet engine in step with every source it compiles.

Numba keys a cached function on the file that defines it (its modification time and size)
only. The engine in ``engine.py`` inlines functions of ``kernel.py``, ``port.py``,
``roce.py``, ``srd.py``, ``transport.py``, ``uet.py`` and columns of ``layout.py``, so a
change there alone would load a stale engine. :func:`drop_stale` compares a digest of all
of them with the one stored beside the cache and removes the packet modules' cache files
when they differ; numba then compiles afresh and caches again.

Example
-------
>>> len(sources_digest())
64
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

#: Every module whose code the compiled engine contains.
SOURCES = ("engine", "kernel", "layout", "port", "roce", "srd", "transport", "uet")
STAMP_NAME = "fabricsim-packet-sources.sha256"
_HERE = Path(__file__).resolve().parent


def sources_digest(folder: Path = _HERE) -> str:
    """SHA-256 over the engine's sources, in a fixed order."""
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode())
        h.update((folder / f"{name}.py").read_bytes())
    return h.hexdigest()


def cache_dir(dispatcher: object) -> Path | None:
    """Where numba keeps ``dispatcher``'s cache files (None: caching is off)."""
    path = getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
    return Path(path) if path else None


def drop_stale(dispatcher: object, digest: str | None = None) -> bool:
    """Remove the packet modules' cached code if it was compiled from other sources.

    Returns True when files were removed. Never raises for a read-only cache folder: numba
    then cannot have written a cache there either.
    """
    folder = cache_dir(dispatcher)
    if folder is None or not folder.is_dir():
        return False
    digest = digest or sources_digest()
    stamp = folder / STAMP_NAME
    with contextlib.suppress(OSError):
        if stamp.read_text() == digest:
            return False
    removed = False
    for name in SOURCES:
        for f in [*folder.glob(f"{name}.*.nbi"), *folder.glob(f"{name}.*.nbc")]:
            f.unlink(missing_ok=True)
            removed = True
    with contextlib.suppress(OSError):
        stamp.write_text(digest)
    return removed
