"""Refusing, before any work, a run that would not fit in the machine's memory.

The backends hold routed transfers in memory, linearly in their number: the analytic
backend every transfer (or queue-pair share of one) of a group with its route, the flow
engine every job and every (flow, link) entry of its routes
(:mod:`fabricsim.backends.flow.memory`). Each estimates its need from counts known before
it routes anything, and :func:`check_fits` turns an estimate above the memory free now
into a :class:`~fabricsim.errors.ConfigError` that says how much it needs, how much there
is and how to shrink the run, instead of a process the kernel kills halfway.

Example
-------
>>> from fabricsim.errors import ConfigError
>>> try:
...     check_fits(3 * 2**30, "routing 8,000,000 transfers", ["fewer ranks"], limit=2**30)
... except ConfigError as e:
...     print(e.message)
routing 8,000,000 transfers needs about 3.0 GiB, but 1.0 GiB is the limit; shrink it: fewer ranks
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from fabricsim.errors import ConfigError

#: Bytes the analytic backend needs per routed transfer (each queue-pair share counts):
#: 490-640 B of peak resident memory per share measured by ``benchmarks/flow_memory.py``
#: (all-to-alls of 512 and 1,024 GPUs over RoCE, 1 and 4 queue pairs), rounded up to
#: about twice: at 2,048 GPUs with 8 queue pairs (33 million shares) the run went past
#: 20 GiB of address space, where 500 B each would have allowed it.
ANALYTIC_BYTES_PER_TRANSFER = 1000
#: The analytic backend checks groups of more routed transfers than this (below, at most
#: about 1 GiB: never worth the look).
CHECK_ABOVE_TRANSFERS = 1_000_000


def available_bytes() -> int:
    """Memory the machine has free now (``MemAvailable`` where the kernel reports it,
    else all physical memory); 0 where neither can be read (then nothing is refused)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def check_fits(need_bytes: float, what: str, shrink: Sequence[str], *,
               limit: float | None = None, field: str = "--backend") -> None:
    """Raise a ConfigError (``field``) when ``need_bytes`` exceeds ``limit`` (default: the
    memory free now), naming ``what`` needs it and the ways to ``shrink`` the run."""
    have = float(limit) if limit is not None else float(available_bytes())
    if have <= 0 or need_bytes <= have:
        return
    gib = 2.0**30
    raise ConfigError(f"{what} needs about {need_bytes / gib:.1f} GiB, but {have / gib:.1f} "
                      f"GiB {'is the limit' if limit is not None else 'is free'}; shrink it: "
                      f"{'; or '.join(shrink)}", field=field)
