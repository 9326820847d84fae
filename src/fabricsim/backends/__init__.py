"""Backends: how long a Schedule takes on a Fabric."""

from fabricsim.backends.base import Backend, IdealBackend, LinkReport, Result, dag_times

__all__ = ["Backend", "IdealBackend", "LinkReport", "Result", "dag_times"]
