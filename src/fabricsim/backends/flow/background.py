"""Background traffic: storage or other jobs' flows sharing the fabric.

A :class:`~fabricsim.scenario.schema.BackgroundSpec` becomes a set of transfers between
GPU ranks (``src``/``dst``; default every rank) that start at ``start`` and move
``nbytes`` each, with the traffic class ``weight``: in the weighted max-min sharing a flow
of weight 2 gets twice the share of a weight-1 flow on a common bottleneck (collective
traffic has weight 1). Patterns:

``incast``        every ``src`` rank sends to ``dst[0]`` (e.g. checkpoint to one target);
``permutation``   a seeded random permutation of ``src`` without fixed points;
``all_to_all``    every ``src`` to every ``dst`` other than itself;
``pairs``         ``src[i] → dst[i]``.

Background flows do not count toward the completion time; they stop with the schedule.

Example
-------
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> from fabricsim.backends.flow.specs import BackgroundSpec
>>> bg = background_transfers(host_fat_tree(4), [BackgroundSpec(pattern="incast",
...                           src=[1, 2, 3], dst=[0], nbytes="1MB")], seed=0)
>>> bg[0].src.tolist(), bg[0].dst.tolist(), float(bg[0].nbytes[0])
([1, 2, 3], [0, 0, 0], 1000000.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.flow.specs import BackgroundSpec
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.units import parse_size, parse_time


@dataclass(frozen=True)
class BackgroundTransfers:
    """Transfers (node ids) of one background source."""

    name: str
    traffic_class: str
    src: NDArray[np.int32]
    dst: NDArray[np.int32]
    nbytes: NDArray[np.float64]
    weight: float
    start: float


def _ranks(fabric: Fabric, ranks: list[int] | None, where: str) -> NDArray[np.int64]:
    if ranks is None:
        return np.arange(fabric.n_gpus, dtype=np.int64)
    r = np.asarray(ranks, dtype=np.int64)
    if r.size == 0 or r.min() < 0 or r.max() >= fabric.n_gpus:
        raise ConfigError(f"ranks must be in 0..{fabric.n_gpus - 1}, got {ranks}", field=where)
    return r


def background_transfers(fabric: Fabric, specs: Sequence[BackgroundSpec | dict[str, Any]],
                         seed: int = 0) -> list[BackgroundTransfers]:
    """Expand background specs into transfers on ``fabric`` (seeded permutation).

    Examples
    --------
    >>> from fabricsim.backends.flow.testing import host_fat_tree
    >>> bg = background_transfers(host_fat_tree(4), [{"pattern": "permutation"}], seed=1)
    >>> sorted(bg[0].dst.tolist()) == [0, 1, 2, 3], bool((bg[0].src != bg[0].dst).all())
    (True, True)
    """
    out: list[BackgroundTransfers] = []
    rng = np.random.default_rng(seed)
    for i, raw in enumerate(specs):
        where = f"background[{i}]"
        spec = raw if isinstance(raw, BackgroundSpec) else BackgroundSpec.model_validate(raw)
        src = _ranks(fabric, spec.src, f"{where}.src")
        dst = _ranks(fabric, spec.dst, f"{where}.dst")
        if spec.pattern == "incast":
            s, d = src[src != dst[0]], np.full(int((src != dst[0]).sum()), dst[0])
            if s.size == 0:
                raise ConfigError(f"an incast into rank {int(dst[0])} needs senders other "
                                  f"than rank {int(dst[0])}", field=f"{where}.src")
        elif spec.pattern == "pairs":
            if src.shape != dst.shape:
                raise ConfigError("pairs needs src and dst of the same length",
                                  field=f"{where}.dst")
            if (src == dst).any():
                i = int(np.flatnonzero(src == dst)[0])
                raise ConfigError(f"pair {i} sends from rank {int(src[i])} to itself, which "
                                  f"moves nothing over the fabric", field=f"{where}.dst")
            s, d = src, dst
        elif spec.pattern == "all_to_all":
            a, b = np.meshgrid(src, dst, indexing="ij")
            keep = a != b
            s, d = a[keep], b[keep]
        else:
            if src.shape[0] < 2:
                raise ConfigError("a permutation needs at least 2 ranks", field=f"{where}.src")
            # a random cyclic shift of a random order has no fixed point
            order = rng.permutation(src)
            shift = int(rng.integers(1, src.shape[0]))
            s, d = order, np.roll(order, -shift)
        nb = float(parse_size(spec.nbytes, field=f"{where}.nbytes"))
        out.append(BackgroundTransfers(
            name=spec.name, traffic_class=spec.traffic_class,
            src=fabric.gpus[s].astype(np.int32), dst=fabric.gpus[d].astype(np.int32),
            nbytes=np.full(s.shape[0], nb), weight=spec.weight,
            start=parse_time(spec.start, field=f"{where}.start")))
    return out
