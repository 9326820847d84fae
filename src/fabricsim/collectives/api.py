"""The public entry points: build, predict and run collectives.

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 1)
>>> sched = build_schedule(fab, "all_reduce", 2**20, algo="ring", proto="simple")
>>> sched.algorithm, sched.protocol, sched.meta["channels"]
('ring', 'simple', 1)
>>> r = run_collective(fab, "all_reduce", 2**30)
>>> r.algorithm, 400e9 < r.busbw < 600e9
('nvls', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numpy.typing import ArrayLike

from fabricsim.backends.base import Backend, Result
from fabricsim.collectives.busbw import bandwidths
from fabricsim.collectives.registry import Group, get_algorithm
from fabricsim.collectives.tuner import (
    REFERENCE_BYTES,
    Tuner,
    build,
    check_collective,
    check_nbytes,
    choose,
)
from fabricsim.fabric.core import Fabric
from fabricsim.results import Tabular
from fabricsim.schedule.core import Schedule


@dataclass(frozen=True, eq=False)
class CollectiveResult(Tabular):
    """Outcome of one collective: time (s), algbw and busbw (bytes/s), choices, raw result.

    ``to_dict()`` / ``to_pandas()``: one row, the backend's figures under ``result.``.

    >>> from fabricsim.fabric import build_cluster
    >>> d = run_collective(build_cluster("dgx-h100", 1), "all_reduce", 2**20).to_dict()
    >>> [k for k in d if not k.startswith("result.")]
    ['time_s', 'algbw_Bps', 'busbw_Bps', 'algorithm', 'protocol']
    >>> d["result.backend"], d["time_s"] > 0
    ('analytic', True)
    """

    time: float
    algbw: float
    busbw: float
    algorithm: str
    protocol: str
    result: Result

    def _record(self) -> dict[str, Any]:
        return {"time_s": self.time, "algbw_Bps": self.algbw, "busbw_Bps": self.busbw,
                "algorithm": self.algorithm, "protocol": self.protocol,
                "result": self.result}


def build_schedule(fabric: Fabric, collective: str, nbytes: float,
                   ranks: ArrayLike | None = None, algo: str | None = None,
                   proto: str | None = None, channels: int | None = None,
                   tuner: Tuner | None = None, nvls_channels: int | None = None) -> Schedule:
    """Compile ``collective`` of ``nbytes`` over ``ranks`` (default all GPUs) to a Schedule.

    ``algo``/``proto`` force a choice; ``None`` picks the least predicted time (by
    ``tuner``, default the fabric's own: see :class:`~fabricsim.collectives.Tuner`). Raises
    ConfigError (bad name or size) or ScheduleError (a forced choice that cannot apply).

    Examples
    --------
    >>> from fabricsim.fabric import build_cluster
    >>> s = build_schedule(build_cluster("dgx-a100", 1), "all_gather", 8e6, algo="ring")
    >>> s.total_bytes() == 8 * 7 / 8 * 8e6
    True
    """
    coll = check_collective(collective)
    size = check_nbytes(nbytes)
    group = Group.of(fabric, ranks)
    c = choose(fabric, coll, size, group.ranks, algo, proto, channels, tuner=tuner,
               nvls_channels=nvls_channels)
    return build(group, coll, size, get_algorithm(c.algorithm), c.protocol, channels,
                 nvls_channels)


def predict_time(fabric: Fabric, collective: str, nbytes: float,
                 ranks: ArrayLike | None = None, algo: str | None = None,
                 proto: str | None = None, tuner: Tuner | None = None,
                 gpus_per_thread: int = 1, nccl_version: str | None = None,
                 back_to_back: bool = False) -> float:
    """Predicted time (s) by the analytic model, of the algorithm and protocol NCCL
    release ``nccl_version`` (default the newest modelled) would run; cached per
    structure, so cheap to repeat. ``back_to_back``: per operation of many issued one
    after another, as nccl-tests times them (see :meth:`Tuner.choose`).

    Examples
    --------
    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 1)
    >>> predict_time(fab, "all_reduce", 2**20) < predict_time(fab, "all_reduce", 2**30)
    True
    """
    return choose(fabric, collective, nbytes, ranks, algo, proto, tuner=tuner,
                  gpus_per_thread=gpus_per_thread, nccl_version=nccl_version,
                  back_to_back=back_to_back).time


def run_collective(fabric: Fabric, collective: str, nbytes: float,
                   ranks: ArrayLike | None = None, algo: str | None = None,
                   proto: str | None = None, backend: str | Backend = "analytic",
                   tuner: Tuner | None = None,
                   channels: int | None = None,
                   nvls_channels: int | None = None) -> CollectiveResult:
    """Select (or take) an algorithm and protocol, build the schedule and run it
    (``channels``, ``nvls_channels``: as :func:`~fabricsim.collectives.tuner.build` takes
    them).

    ``backend`` is a name for :func:`fabricsim.backends.get_backend` or a Backend.

    Examples
    --------
    >>> from fabricsim.fabric import build_cluster
    >>> r = run_collective(build_cluster("dgx-a100", 1), "all_reduce", 2**30, algo="ring")
    >>> r.protocol, round(r.busbw / 1e9)
    ('simple', 229)
    """
    from fabricsim.backends import get_backend

    coll = check_collective(collective)
    size = check_nbytes(nbytes)
    group = Group.of(fabric, ranks)
    c = choose(fabric, coll, size, group.ranks, algo, proto, channels, tuner=tuner,
               nvls_channels=nvls_channels)
    sched = build(group, coll, size, get_algorithm(c.algorithm), c.protocol, channels,
                  nvls_channels)
    if backend == "analytic" and tuner is not None:
        be: Backend = tuner.backend  # the tuner's own protocol model
    else:
        be = get_backend(backend) if isinstance(backend, str) else backend
    res = be.run(sched, fabric)
    alg, bus = bandwidths(coll, size, res.time, group.n)
    return CollectiveResult(time=res.time, algbw=alg, busbw=bus, algorithm=c.algorithm,
                            protocol=c.protocol, result=res)


__all__ = ["REFERENCE_BYTES", "CollectiveResult", "build_schedule", "predict_time",
           "run_collective"]
