"""Flow-level backend: contention, ECMP collisions, oversubscription, stragglers, faults.

Example
-------
>>> FlowBackend(routing="spray").name
'flow'
"""

from fabricsim.backends.flow.backend import FlowBackend
from fabricsim.backends.flow.faults import FaultPlan, plan_faults
from fabricsim.backends.flow.maxmin import maxmin_numba, maxmin_numpy
from fabricsim.backends.flow.results import Timeline
from fabricsim.backends.flow.testing import host_fat_tree

__all__ = ["FaultPlan", "FlowBackend", "Timeline", "host_fat_tree", "maxmin_numba",
           "maxmin_numpy", "plan_faults"]
