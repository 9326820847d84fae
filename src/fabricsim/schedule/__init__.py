"""Schedules: what must be sent, as a DAG of steps of concurrent transfers."""

from fabricsim.schedule.core import Pipeline, Schedule, Step

__all__ = ["Pipeline", "Schedule", "Step"]
