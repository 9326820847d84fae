"""Compile the flow and packet backends' numba kernels once, ahead of use.

numba compiles a kernel the first time a process calls it and keeps the machine code in
its on-disk cache (``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``); a later
process loads it in well under a second. The first call is slow: about 25 s for the flow
backend and 40 s for the packet backend on a 2-core machine, paid by every process that
starts before the cache is written. Several processes started together on a fresh
install (a sweep's workers, parallel test workers) would each compile the same kernels.
Running this first compiles each backend once, the two in parallel::

    python -m fabricsim.backends.precompile            # flow and packet
    python -m fabricsim.backends.precompile packet     # one of them

``make test`` does so before the tests. A warm cache makes it cost the two imports.

Example
-------
>>> from fabricsim.backends.precompile import warm
>>> warm("flow") >= 0.0   # seconds this process spent; about 0.5 when already cached
True
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from fabricsim.errors import unknown

#: Backends with numba kernels.
COMPILED = ("flow", "packet")


def warm(backend: str) -> float:
    """Run one small transfer on ``backend`` (``flow`` or ``packet``) so that numba
    compiles, or loads from its cache, every kernel the backend runs; the seconds taken."""
    if backend not in COMPILED:
        raise unknown("backend", backend, COMPILED, field="backend")
    from fabricsim.backends.registry import get_backend
    from fabricsim.fabric import build_cluster
    from fabricsim.schedule.core import Schedule, Step

    t0 = time.perf_counter()
    fab = build_cluster("dgx-h100", 2, gpus_per_node=1)
    a, b = (int(g) for g in fab.gpus[:2])
    step = Step(src=np.array([a, b]), dst=np.array([b, a]), nbytes=np.array([65536.0] * 2))
    sched = Schedule(steps=(step,), nbytes=65536)
    get_backend(backend).run(sched, fab)
    if backend == "packet":  # Ultra Ethernet runs an engine of its own (UET compiled in)
        from fabricsim.backends.packet import PacketBackend

        PacketBackend(transport="uet").run(sched, fab)
    return time.perf_counter() - t0


def precompile(backends: Sequence[str] = COMPILED, processes: int | None = None
               ) -> dict[str, float]:
    """Warm ``backends``, each in its own process, all at once (``processes``: at most
    that many together; default one per backend); the seconds each took."""
    for b in backends:
        if b not in COMPILED:
            raise unknown("backend", b, COMPILED, field="backend")
    todo = list(dict.fromkeys(backends))
    if not todo:
        return {}
    with ProcessPoolExecutor(max_workers=processes or len(todo)) as pool:
        return dict(zip(todo, pool.map(warm, todo), strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fabricsim.backends.precompile [flow] [packet]``."""
    from fabricsim.errors import FabricsimError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        took = precompile(args or COMPILED)
    except FabricsimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("numba kernels ready: " + ", ".join(f"{b} {s:.1f} s" for b, s in took.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
