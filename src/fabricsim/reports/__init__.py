"""Reports: summaries, tables and the demo report, built from Fabrics and Results only."""

from fabricsim.jobs.describe import ClusterSummary, HierarchyLevel, summarize

__all__ = ["ClusterSummary", "HierarchyLevel", "summarize"]
