"""Hypothesis profiles: ``ci`` (default, deterministic) and ``fuzz`` (``make fuzz``).

``ci`` is what ``make test`` and CI run: derandomized (the same examples on every run and
every machine), no example database (a failure found once cannot be replayed into later
runs of the same clone), and no deadline, so a loaded 2-core machine cannot fail a test by
being slow. ``fuzz`` draws fresh random examples, keeps the database under ``.hypothesis/``
and multiplies every test's example budget (see :func:`hypothesis_budget.examples`).
Select with ``HYPOTHESIS_PROFILE=fuzz``.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "fuzz", derandomize=False, database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
    deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a collection where two tests share a node id: ``make test`` runs in parallel
    (pytest-xdist), which schedules and reports by node id and so would run only one."""
    counts = Counter(item.nodeid for item in items)
    shared = sorted(k for k, n in counts.items() if n > 1)
    if shared:
        raise pytest.UsageError(f"{len(shared)} node ids name more than one test, e.g. "
                                f"{shared[0]!r}: give each its own id")
