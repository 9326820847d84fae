"""The serving engines' own TP all-reduce (fabricsim.collectives.oneshot)."""

from __future__ import annotations

import dataclasses

import pytest

from fabricsim.collectives import predict_time
from fabricsim.collectives.oneshot import MAX_BYTES, engine_allreduce_time
from fabricsim.fabric import build_cluster
from fabricsim.protocols import PROTOCOLS


def test_one_shot_then_two_shot_from_the_mechanism() -> None:
    fab = build_cluster("dgx-h100", 2)
    eight = list(range(8))
    hop = PROTOCOLS["ll"].hop_latency["nvlink"]
    rate = 18 * 25e9 * PROTOCOLS["simple"].efficiency["nvlink"]  # 18 NVLink4 links
    small, big = 16 * 2**10, 4 * 2**20
    assert engine_allreduce_time(fab, eight, small) == pytest.approx(2 * hop + 7 * small / rate)
    assert engine_allreduce_time(fab, eight, big) == pytest.approx(3 * hop
                                                                   + 2 * 7 / 8 * big / rate)
    # without a launch per call it is well below NCCL's time under nccl-tests
    assert engine_allreduce_time(fab, eight, small) < predict_time(fab, "all_reduce", small,
                                                                   ranks=eight) / 5


def test_the_engines_call_nccl_beyond_their_buffer_or_their_domain() -> None:
    fab = build_cluster("dgx-h100", 2)
    assert engine_allreduce_time(fab, list(range(8)), MAX_BYTES + 1) is None
    assert engine_allreduce_time(fab, [0, 8], 2**10) is None  # across servers
    assert engine_allreduce_time(fab, [0], 2**10) == 0.0


def test_serving_uses_it_for_tp_and_nccl_when_the_engine_does_not() -> None:
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.serving.instance import build_instance, get_engine

    fab = build_cluster("dgx-h100", 1)
    m = get_model("llama2-70b")
    own = build_instance(m, fab, tp=8, pp=1, ep=1, precision="bf16", kv_precision=None,
                         engine="trtllm", comm=None)
    nccl = build_instance(m, fab, tp=8, pp=1, ep=1, precision="bf16", kv_precision=None,
                          comm=None,
                          engine=dataclasses.replace(get_engine("trtllm"), own_allreduce=False))
    act = 64 * m.hidden * 2.0  # a batch of 64 tokens
    assert own._allreduce(act) == engine_allreduce_time(fab, list(range(8)), act)
    assert nccl._allreduce(act) == pytest.approx(
        predict_time(fab, "all_reduce", act, ranks=list(range(8))))
