"""``fabricsim.backends.precompile`` runs each compiled backend's numba kernels.

That it reaches *every* kernel shows only on a cold cache (a fresh ``NUMBA_CACHE_DIR``:
``python -m fabricsim.backends.precompile`` writes the cache files of all 69 kernels, the
same set a full test run writes); compiling takes a minute, so CI checks the cheaper
half: the warm-up runs the backend's compiled path, not a shortcut around it."""

from __future__ import annotations

import importlib

import pytest
from numba.core.registry import CPUDispatcher

from fabricsim.backends.precompile import COMPILED, main, precompile, warm
from fabricsim.errors import ConfigError

MODULES = {
    "flow": ("kernel", "maxmin"),
    "packet": ("engine", "kernel", "port", "roce", "srd", "transport", "uet"),
}


def _kernels(backend: str) -> dict[str, CPUDispatcher]:
    out = {}
    for m in MODULES[backend]:
        mod = importlib.import_module(f"fabricsim.backends.{backend}.{m}")
        out.update({f"{m}.{k}": v for k, v in vars(mod).items()
                    if isinstance(v, CPUDispatcher) and v.__module__ == mod.__name__})
    return out


def test_modules_listed_here_are_all_that_hold_kernels() -> None:
    import pkgutil

    for backend in COMPILED:
        pkg = importlib.import_module(f"fabricsim.backends.{backend}")
        holding = {m.name for m in pkgutil.iter_modules(pkg.__path__)
                   if any(isinstance(v, CPUDispatcher) for v in vars(importlib.import_module(
                       f"{pkg.__name__}.{m.name}")).values())}
        assert holding <= set(MODULES[backend]), holding - set(MODULES[backend])


@pytest.mark.parametrize("backend", COMPILED)
def test_warm_runs_the_compiled_kernels(backend: str) -> None:
    kernels = _kernels(backend)
    assert len(kernels) >= 10
    assert warm(backend) > 0.0
    # the kernels called from Python hold the signature warm() compiled (or loaded);
    # those inlined into them are compiled with them
    assert any(d.signatures for d in kernels.values()), backend


def test_unknown_backend_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="analytic"):
        precompile(["flow", "analytic"])
    assert main(["ns3"]) == 2
    assert "ns3" in capsys.readouterr().err
