"""Schedules: what must be sent, as a DAG of steps of concurrent transfers."""

from fabricsim.schedule.core import Crossings, Pipeline, Schedule, Step

__all__ = ["Crossings", "Pipeline", "Schedule", "Step"]
