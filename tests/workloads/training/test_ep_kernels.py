"""Training steps time expert all-to-all with the EP kernel family they assume."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError, ModelError
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


def test_capacity_factor_caps_the_busiest_rank() -> None:
    base = _step(moe_imbalance=1.6)["breakdown"]["ep"]  # type: ignore[index]
    capped = _step(moe_imbalance=1.6, moe_capacity_factor=1.2)
    assert capped["breakdown"]["ep"] == pytest.approx(base * 1.2 / 1.6)  # type: ignore[index]
    assert any("drops about 25%" in w for w in capped["warnings"])  # type: ignore[union-attr]
    padded = _step(moe_capacity_factor=1.5, moe_pad_to_capacity=True)["breakdown"]["ep"]  # type: ignore[index]
    plain = _step()["breakdown"]["ep"]  # type: ignore[index]
    assert padded == pytest.approx(1.5 * plain)
    with pytest.raises(ModelError) as e:
        ParallelConfig(moe_pad_to_capacity=True).resolve(DS, 64)
    assert e.value.field == "training.moe_pad_to_capacity"


def test_megatron_capacity_flags_are_read() -> None:
    from fabricsim.workloads.training.megatron import parse_megatron_args

    s, ignored = parse_megatron_args("--moe-expert-capacity-factor 1.25 "
                                     "--moe-pad-expert-input-to-capacity")
    assert s["moe_capacity_factor"] == 1.25 and s["moe_pad_to_capacity"] is True
    assert not ignored
    with pytest.raises(ConfigError):
        parse_megatron_args("--moe-expert-capacity-factor lots")

