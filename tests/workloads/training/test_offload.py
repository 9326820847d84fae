"""Activation offloading to host memory (Megatron's --cpu-offloading-num-layers)."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.megatron import parse_megatron_args
from fabricsim.workloads.training.memory import memory_per_gpu, offload_bytes_per_layer
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

M = get_model("llama3-70b")
#: NVIDIA's Llama 3 70B FP8 recipe on 64 GB200 (Megatron-Bridge): FSDP, MBS 2, 8K tokens.
NEMO = dict(micro_batch=2, seq_len=8192, precision="fp8", zero="fsdp", fsdp_impl="megatron",
            global_batch=256)


def test_offloading_fits_nvidias_gb200_recipe() -> None:
    """Without offloading the recipe needs ~320 GiB of a 186 GiB GB200; with its 40
    offloaded layers it fits, one layer's activations staying on the GPU in transit."""
    full = memory_per_gpu(M, ParallelConfig(**NEMO).resolve(M, 64))
    off = memory_per_gpu(M, ParallelConfig(offload_layers=40, **NEMO).resolve(M, 64))
    p = ParallelConfig(**NEMO).resolve(M, 64)
    assert full.total > 300 * 2**30 and off.total < 186 * 2**30
    assert full.activations - off.activations == pytest.approx(
        39 * offload_bytes_per_layer(M, p), rel=1e-9)


def test_copies_hide_behind_compute_until_the_host_link_runs_out() -> None:
    """NVLink-C2C (225 GB/s per GPU) moves 40 layers of activations within the forward;
    over an H100's PCIe Gen5 (63 GB/s) 40 layers still hide behind the slower GPU's
    forward, 79 do not, and the step waits for the rest."""
    gb = fs.build_cluster("gb200-nvl72", 1, gpus_per_node=64)
    base = simulate_step(M, ParallelConfig(**NEMO), gb, check_memory=False)
    off = simulate_step(M, ParallelConfig(offload_layers=40, **NEMO), gb, check_memory=False)
    assert off.step_time_s == pytest.approx(base.step_time_s, rel=1e-9)
    assert off.parallel["offload_layers"] == 40
    h = fs.build_cluster("dgx-h100", 8)
    kw = {**NEMO, "global_batch": 128}
    none = simulate_step(M, ParallelConfig(**kw), h, check_memory=False)
    half = simulate_step(M, ParallelConfig(offload_layers=40, **kw), h, check_memory=False)
    slow = simulate_step(M, ParallelConfig(offload_layers=79, **kw), h, check_memory=False)
    assert half.step_time_s == pytest.approx(none.step_time_s, rel=1e-9)
    p = ParallelConfig(**kw).resolve(M, 64)
    copy = 79 * offload_bytes_per_layer(M, p) / 63e9  # one direction, one micro-batch
    fwd = none.breakdown["compute"] / p.num_micro / 3  # about a third of fwd + bwd
    waited = slow.step_time_s - none.step_time_s
    assert 0.5 * (copy - fwd) < waited / p.num_micro < copy


def test_offload_flags_and_limits() -> None:
    assert parse_megatron_args("--cpu-offloading-num-layers 20")[0]["offload_layers"] == 20
    for bad, words in (({"offload_layers": 80}, "less than the model's 80 layers"),
                       ({"offload_layers": 10, "pp": 2}, "without pipeline parallelism"),
                       ({"offload_layers": 10, "recompute": "full"}, "recomputation")):
        with pytest.raises(ModelError, match=words) as e:  # as Megatron refuses them
            ParallelConfig(**{**NEMO, **bad}).resolve(M, 64)
        assert e.value.field == "training.offload_layers"
