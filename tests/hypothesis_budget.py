"""Example budgets for Hypothesis tests: small in CI, multiplied under ``make fuzz``.

A test asks for ``examples(n)``: ``n`` under the ``ci`` profile, ``n`` times
``FABRICSIM_FUZZ_SCALE`` (default 20) under the ``fuzz`` profile.
"""

from __future__ import annotations

import os


def examples(n: int) -> int:
    """The example budget for a test that runs ``n`` examples in CI."""
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") != "fuzz":
        return n
    return n * int(os.environ.get("FABRICSIM_FUZZ_SCALE", "20"))
