"""Hybrid sharding (HSDP): FSDP within shard groups, replicas all-reduced across them."""

from __future__ import annotations

import pytest

import fabricsim as fs
from fabricsim.errors import ModelError
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

M = get_model("llama3-8b")


def _step(**kw: object) -> object:
    cfg = ParallelConfig(tp=1, zero="fsdp", global_batch=256, seq_len=4096,
                         **kw)  # type: ignore[arg-type]
    return simulate_step(M, cfg, fs.build_cluster("dgx-h100", 8), check_memory=False)


def test_shard_groups_hold_more_and_replicas_all_reduce() -> None:
    full, hybrid = _step(), _step(fsdp_shard_size=8)
    # optimizer state and gradients shard over 8 ranks instead of 64
    assert hybrid.memory.total > full.memory.total + 5 * 2**30  # type: ignore[attr-defined]
    # the shard groups stay inside a server; the replicas' all-reduce adds traffic
    assert hybrid.comm_total_s["dp"] != full.comm_total_s["dp"]  # type: ignore[attr-defined]
    p = ParallelConfig(tp=1, zero="fsdp", fsdp_shard_size=8).resolve(M, 64)
    shard, reps = p.hsdp_groups("dp")
    assert len(shard) == 8 and len(reps) == 8 and shard[:2] == [0, 1]


def test_shard_size_that_cannot_apply_is_refused() -> None:
    with pytest.raises(ModelError) as e:
        ParallelConfig(tp=1, zero="fsdp", fsdp_shard_size=6).resolve(M, 64)
    assert e.value.field == "training.fsdp_shard_size" and "64" in e.value.message
    with pytest.raises(ModelError) as e:
        ParallelConfig(tp=1, zero=0, fsdp_shard_size=8).resolve(M, 64)
    assert e.value.field == "training.fsdp_shard_size"


def test_torchtitan_hsdp_is_read_as_hybrid_sharding() -> None:
    from fabricsim.workloads.training.torchtitan import read_torchtitan

    out, applied, _ = read_torchtitan(
        '[model]\nname = "llama3"\nflavor = "8B"\n'
        '[parallelism]\ndata_parallel_replicate_degree = 4\n'
        'data_parallel_shard_degree = 16\n'
        '[training]\nlocal_batch_size = 2\nseq_len = 4096\n')
    assert out["fsdp_shard_size"] == 16 and out["dp"] == 64
    assert any("HSDP" in a for a in applied)
