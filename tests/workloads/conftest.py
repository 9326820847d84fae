"""Shared fixtures for workload tests.

``RingDouble`` is a TEST DOUBLE for the collective engine: a closed-form ring α–β model on
the group's bottleneck link. It lets the step model be tested on its own; the library's
default CommModel is the real engine (``EngineComm``), never this.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fabricsim.catalog import get_catalog
from fabricsim.fabric import Fabric

_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
           "all_gather": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
           "sendrecv": lambda n: 1.0, "broadcast": lambda n: 1.0}


class RingDouble:
    """TEST DOUBLE: ring α–β time on the bottleneck link of the group.

    Inside one server: NVLink per-GPU bandwidth (or the PCIe link without NVLink).
    Across servers: the per-GPU share of the server's NICs, capped by the intra link.
    """

    def __init__(self, fabric: Fabric, alpha: float = 5e-6, scale: float = 1.0) -> None:
        cat = get_catalog()
        info = fabric.info
        gpu = cat.gpu(info.gpu)
        system = cat.system(info.system)
        self.gps = info.gpus_per_server
        self.intra = (cat.link(gpu.nvlink).bandwidth if info.nvlink_domain_gpus > 1
                      else cat.link(system.pcie).bandwidth / 2) * scale
        self.nic = info.nic_bandwidth * info.nics_per_server / self.gps * scale
        self.alpha = alpha
        self.calls = 0

    def time(self, collective: str, ranks: Sequence[int], nbytes: float) -> float:
        self.calls += 1
        n = len(ranks)
        if n <= 1 or nbytes <= 0:
            return 0.0
        servers = {r // self.gps for r in ranks}
        bw = self.intra if len(servers) == 1 else min(self.intra, self.nic)
        steps = 1 if collective == "sendrecv" else (2 * (n - 1) if collective == "all_reduce"
                                                     else n - 1)
        return steps * self.alpha + _FACTOR[collective](n) * nbytes / bw


@pytest.fixture
def ring_double() -> type[RingDouble]:
    return RingDouble
