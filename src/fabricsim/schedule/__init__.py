"""Schedules: what must be sent, as a DAG of steps of concurrent transfers."""

from fabricsim.schedule.core import Schedule, Step

__all__ = ["Schedule", "Step"]
