"""Schedules: what must be sent, as a DAG of steps of concurrent transfers."""

from fabricsim.schedule.core import Channels, Crossings, PeerParts, Pipeline, Schedule, Step

__all__ = ["Channels", "Crossings", "PeerParts", "Pipeline", "Schedule", "Step"]
