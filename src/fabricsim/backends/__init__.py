"""Backends: how long a Schedule takes on a Fabric."""

from fabricsim.backends.base import Backend, IdealBackend, LinkReport, Result, dag_times
from fabricsim.backends.registry import BACKENDS, get_backend

__all__ = ["BACKENDS", "Backend", "IdealBackend", "LinkReport", "Result", "dag_times",
           "get_backend"]
