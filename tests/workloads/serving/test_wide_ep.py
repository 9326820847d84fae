"""Data-parallel attention with wide expert parallelism (SGLang/DeepSeek style)."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.serving.static import simulate_inference

DS = get_model("deepseek-v3")


def _run(fab: fs.Fabric, **kw: object) -> object:
    base = dict(tp=32, ep=32, attention_dp=32, batch=1024, prompt_len=2000,
                output_len=100, precision="fp8")
    return simulate_inference(DS, fab, **{**base, **kw})  # type: ignore[arg-type]


def test_decode_names_its_kernels_and_times_dispatch() -> None:
    fab = fs.build_cluster("dgx-h100", 4)
    r = _run(fab)
    d = r.as_dict()  # type: ignore[attr-defined]
    assert d["ep_kernel"] == "deepep-ll (decode), deepep (prefill)"
    assert d["ep_s_per_token"] > 0 and d["prefill_ep_s"] > 0
    assert d["decode_breakdown_s"]["comm_s"] == 0.0  # attention TP 1: no all-reduce
    # the weights a GPU holds: dense layers whole, 1/32 of the experts
    assert d["memory_per_gpu_gib"] < 60
    assert not any("all-reduces" in w for w in d["warnings"])
    assert any("scale-out" in w for w in d["warnings"])


def test_rdma_vs_one_nvlink_domain() -> None:
    """The fabric question: the same wide-EP decode across four H100 servers over IB
    against one GB200 NVL72 rack (NVLink only)."""
    ib = _run(fs.build_cluster("dgx-h100", 4)).as_dict()  # type: ignore[attr-defined]
    rack = _run(fs.build_cluster("gb200-nvl72", 1),
                ep_kernel="nvlink-onesided").as_dict()  # type: ignore[attr-defined]
    assert rack["ep_kernel"] == "nvlink-onesided"
    assert rack["ep_s_per_token"] < 0.5 * ib["ep_s_per_token"]


def test_attention_groups_wider_than_one_gpu() -> None:
    r = _run(fs.build_cluster("dgx-h100", 4), attention_dp=8).as_dict()  # type: ignore[attr-defined]
    assert r["decode_breakdown_s"]["comm_s"] > 0  # all-reduce inside each 4-GPU group


@pytest.mark.parametrize(("kw", "field"), [
    ({"ep": 16}, "inference.ep"),
    ({"attention_dp": 5}, "inference.attention_dp"),
    ({"tp": 512, "ep": 512, "attention_dp": 512}, "inference.tp"),
    ({"ep_kernel": "fastest"}, "inference.ep_kernel"),
])
def test_layouts_that_cannot_be_placed(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        _run(fs.build_cluster("dgx-h100", 4), **kw)
    assert e.value.field == field


def test_ep_larger_than_the_experts_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        _run(fs.build_cluster("dgx-h100", 64), tp=512, ep=512, attention_dp=512)
    assert e.value.field == "inference.ep" and "256 experts" in e.value.message


def test_dense_model_and_kernel_without_dp_are_refused() -> None:
    fab = fs.build_cluster("dgx-h100", 1)
    with pytest.raises(ConfigError) as e:
        simulate_inference(get_model("llama3-70b"), fab, tp=8, attention_dp=8)
    assert e.value.field == "inference.attention_dp"
    with pytest.raises(ConfigError) as e:
        simulate_inference(get_model("mixtral-8x7b"), fab, tp=8, ep=8, ep_kernel="deepep")
    assert e.value.field == "inference.ep_kernel"


def test_redundant_experts_let_ep72_place_deepseek() -> None:
    """SGLang's decode on 9 x 8 H100 (EP 72): 256 experts + 32 redundant copies = 288."""
    fab = fs.build_cluster("dgx-h100", 9)
    with pytest.raises(ConfigError) as e:
        _run(fab, tp=72, ep=72, attention_dp=72)
    assert "--redundant-experts 32" in e.value.message
    r = _run(fab, tp=72, ep=72, attention_dp=72, redundant_experts=32).as_dict()  # type: ignore[attr-defined]
    assert r["ep_s_per_token"] > 0 and r["memory_per_gpu_gib"] < 40


def test_nvfp4_weights_on_blackwell_only() -> None:
    rack = fs.build_cluster("gb200-nvl72", 1)
    fp8 = _run(rack, tp=64, ep=64, attention_dp=64).as_dict()  # type: ignore[attr-defined]
    fp4 = _run(rack, tp=64, ep=64, attention_dp=64, precision="nvfp4").as_dict()  # type: ignore[attr-defined]
    assert fp4["memory_per_gpu_gib"] < fp8["memory_per_gpu_gib"]
    assert fp4["tpot_s"] < fp8["tpot_s"]
    with pytest.raises(ConfigError) as e:
        simulate_inference(get_model("llama3-70b"), fs.build_cluster("dgx-h100", 1),
                           precision="nvfp4")
    assert e.value.field == "inference.precision"
