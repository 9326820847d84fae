"""Chakra execution traces of a training step (fabricsim.interop.chakra, train --chakra)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fabricsim as fs
from fabricsim.cli.app import main
from fabricsim.errors import ConfigError
from fabricsim.interop.chakra import COMM_TYPES, read_traces, step_trace, write_traces
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig
from fabricsim.workloads.training.step import simulate_step

M = get_model("llama3-70b")


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    fab = fs.build_cluster("dgx-h100", 4)
    return simulate_step(M, ParallelConfig(tp=8, pp=2, global_batch=16, seq_len=4096,
                                           recompute="full"), fab)


def test_trace_structure(result) -> None:  # type: ignore[no-untyped-def]
    first, last = step_trace(result, M, stage=0), step_trace(result, M, stage=1)
    m, layers = result.parallel["num_micro"], result.parallel["stage_layers"][0]
    comp = [n for n in first if n.type == "COMP_NODE"]
    assert len(comp) == 2 * m * layers + 1                  # fwd + bwd per layer, optimizer
    coll = [n for n in first if n.type == "COMM_COLL_NODE"]
    assert len(coll) == 2 * 2 * m * layers + 2              # TP AG+RS fwd and bwd, DP RS+AG
    assert sum(n.type == "COMM_SEND_NODE" for n in first) == m   # activations forward
    assert sum(n.type == "COMM_RECV_NODE" for n in last) == m
    # every node depends on the one before: a chain whose compute sums to the model's
    assert all(n.deps == ((n.id - 1,) if n.id else ()) for n in first)
    busy = sum(n.duration_us for n in comp) * 1e-6
    want = result.breakdown["compute"] + result.breakdown["optimizer"]
    assert busy == pytest.approx(want, rel=1e-6)
    with pytest.raises(ConfigError, match="stage"):
        step_trace(result, M, stage=2)


def test_written_files_read_back(result, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    nodes = step_trace(result, M, stage=0)
    (path,) = write_traces({0: nodes}, tmp_path / "job", {"model": M.name})
    meta, read = read_traces(path)
    assert meta["version"] and meta["attr"][0]["stringVal"] == "llama3-70b"
    assert len(read) == len(nodes)
    coll = next(d for d, n in zip(read, nodes, strict=True) if n.type == "COMM_COLL_NODE")
    attrs = {a["name"]: a for a in coll["attr"]}
    assert attrs["is_cpu_op"]["boolVal"] is False          # presence kept for False
    assert int(attrs["comm_type"]["int64Val"]) in COMM_TYPES.values()
    assert int(attrs["comm_size"]["int64Val"]) > 0


def test_cli_writes_one_trace_per_stage(capsys, tmp_path: Path) -> None:
    assert main(["train", "--system", "dgx-h100", "--nodes", "4", "--model", "llama3-70b",
                 "--tp", "8", "--pp", "2", "--global-batch", "16", "--seq-len", "4096",
                 "--recompute", "full", "--chakra", str(tmp_path / "t"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in d["chakra_traces"]] == ["t.0.et", "t.16.et"]
    assert all(Path(p).stat().st_size > 1000 for p in d["chakra_traces"])


@pytest.mark.parametrize("grad_bytes", [2, 4])
def test_dp_reduce_scatter_moves_gradients_in_their_reduce_dtype(grad_bytes: int) -> None:
    """FP32 gradient reduction (Megatron's default with --bf16) doubles the
    reduce-scatter's bytes; the weights are all-gathered in BF16 either way."""
    fab = fs.build_cluster("dgx-h100", 4)
    r = simulate_step(M, ParallelConfig(tp=8, pp=2, global_batch=16, seq_len=4096,
                                        recompute="full",
                                        grad_reduce_dtype={2: "bf16", 4: "fp32"}[grad_bytes]), fab)
    nodes = {n.name: n for n in step_trace(r, M, stage=0)}
    shard = M.params / 16
    rs = nodes["dp gradient reduce-scatter"].comm_bytes
    ag = nodes["dp parameter all-gather"].comm_bytes
    assert (rs, ag) == (int(shard * grad_bytes), int(shard * 2))
