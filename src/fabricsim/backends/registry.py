"""Backends by name: ``get_backend("analytic" | "flow" | "packet" | "hybrid" | "ideal",
**options)``.

Example
-------
>>> get_backend("ideal").name
'ideal'
"""

from __future__ import annotations

import importlib
from typing import Any

from fabricsim.backends.base import Backend, IdealBackend
from fabricsim.errors import unknown

#: name -> "module:Class"; modules are imported on first use.
BACKENDS: dict[str, str] = {
    "analytic": "fabricsim.backends.analytic:AnalyticBackend",
    "flow": "fabricsim.backends.flow:FlowBackend",
    "packet": "fabricsim.backends.packet:PacketBackend",
    "hybrid": "fabricsim.backends.hybrid:HybridBackend",
}


def get_backend(name: str, **options: Any) -> Backend:
    """Instantiate the backend called ``name`` with ``options``."""
    if name == "ideal":
        return IdealBackend(**options)
    if name not in BACKENDS:
        raise unknown("backend", name, [*BACKENDS, "ideal"], field="backend")
    module, cls = BACKENDS[name].split(":")
    backend: Backend = getattr(importlib.import_module(module), cls)(**options)
    return backend
