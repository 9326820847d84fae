"""Training steps time expert all-to-all with the EP kernel family they assume."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

DS = get_model("deepseek-v3")


def _step(**kw: object) -> dict[str, object]:
    fab = fs.build_cluster("dgx-h100", 8)
    cfg = ParallelConfig(pp=2, ep=32, micro_batch=1, global_batch=64, seq_len=4096,
                         precision="fp8", **kw)  # type: ignore[arg-type]
    return simulate_step(DS, cfg, fab, check_memory=False).as_dict()


def test_each_kernel_is_named_and_timed() -> None:
    got = {k: _step(moe_dispatcher=k) for k in ("alltoall", "deepep", "hybridep",
                                                  "deepep-ll")}
    names = {k: d["parallel"]["ep_kernel"] for k, d in got.items()}  # type: ignore[index]
    assert names == {"alltoall": "nccl", "deepep": "deepep", "hybridep": "hybridep",
                     "deepep-ll": "deepep-ll"}
    ep = {k: d["breakdown"]["ep"] for k, d in got.items()}  # type: ignore[index]
    # one network copy per server beats one per expert across four servers
    assert ep["deepep"] < 0.7 * ep["alltoall"] and ep["hybridep"] < 0.7 * ep["alltoall"]
    # the low-latency kernels send a copy per expert straight over the network
    assert ep["deepep-ll"] > ep["deepep"]


def test_aliases_and_refusals() -> None:
    assert ParallelConfig(moe_dispatcher="low_latency").moe_dispatcher == "deepep-ll"
    assert ParallelConfig(moe_dispatcher="nccl").moe_dispatcher == "alltoall"
    with pytest.raises(ConfigError) as e:
        ParallelConfig(moe_dispatcher="fastest")
    assert e.value.field == "training.moe_dispatcher"


def test_onesided_across_servers_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        _step(moe_dispatcher="nvlink-onesided")
    assert e.value.field == "--ep-kernel"
