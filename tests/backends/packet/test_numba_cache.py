"""The packet engine's numba cache follows every source compiled into it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

from fabricsim.backends.packet import engine
from fabricsim.backends.packet.numba_cache import (
    SOURCES,
    STAMP_NAME,
    cache_dir,
    drop_stale,
    sources_digest,
)


def _fake_dispatcher(folder: Path) -> SimpleNamespace:
    return SimpleNamespace(_cache=SimpleNamespace(_cache_path=str(folder)))


def test_the_real_engine_exposes_its_cache_folder() -> None:
    # if numba renames its cache attributes, this fails instead of silently caching stale
    folder = cache_dir(engine.run_engine)
    assert folder is not None and folder.is_dir()


def test_a_change_in_any_source_drops_the_cached_engine(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    here = Path(engine.__file__).parent
    for name in SOURCES:
        shutil.copy(here / f"{name}.py", src / f"{name}.py")
    cache = tmp_path / "cache"
    cache.mkdir()
    disp = _fake_dispatcher(cache)
    d0 = sources_digest(src)
    assert drop_stale(disp, d0) is False  # nothing cached yet
    assert (cache / STAMP_NAME).read_text() == d0
    compiled = [cache / "engine.run_engine-233.py311.nbi", cache / "port.kick-1.py311.nbc"]
    other = cache / "unrelated.f-1.py311.nbi"
    for f in [*compiled, other]:
        f.write_text("x")
    assert drop_stale(disp, d0) is False  # same sources: cache kept
    assert all(f.exists() for f in compiled)
    (src / "roce.py").write_text((src / "roce.py").read_text() + "\n# changed\n")
    d1 = sources_digest(src)
    assert d1 != d0
    assert drop_stale(disp, d1) is True
    assert not any(f.exists() for f in compiled) and other.exists()
    assert (cache / STAMP_NAME).read_text() == d1


def test_no_cache_folder_is_not_an_error(tmp_path: Path) -> None:
    assert drop_stale(SimpleNamespace()) is False
    assert drop_stale(_fake_dispatcher(tmp_path / "missing")) is False
