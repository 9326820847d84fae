"""Every public result type: a flat, JSON-valid ``to_dict()`` and a ``to_pandas()``."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest

import fabricsim as fs
from fabricsim.errors import ConfigError
from fabricsim.results import Tabular, flatten, frame, scalars
from fabricsim.workloads.models import get_model
from fabricsim.workloads.training.parallel import ParallelConfig

SCALARS = (str, int, float, bool, type(None))


@cache
def _fab(nodes: int = 2) -> fs.Fabric:
    return fs.build_cluster("dgx-h100", nodes=nodes)


@cache
def _step() -> Any:
    from fabricsim.workloads.training.step import simulate_step

    return simulate_step(get_model("llama2-7b"), ParallelConfig(seq_len=2048), _fab())


def _collective() -> Any:
    from fabricsim.collectives import run_collective

    return run_collective(_fab(), "all_reduce", 2**24)


def _flow_result() -> Any:
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.collectives import build_schedule

    fab = fs.build_cluster("dgx-h100", nodes=2, gpus_per_node=2)
    return FlowBackend(record_timeline=True).run(
        build_schedule(fab, "all_reduce", 2**20, algo="ring"), fab)


def _packet_run() -> Any:
    from fabricsim.jobs.packet import run_packet_scenario
    from fabricsim.scenario import Scenario

    sc = Scenario.model_validate({"cluster": {
        "system": "dgx-h100", "nodes": 4, "gpus_per_node": 1, "fabric": "roce-400g"},
        "packet": {"traffic": {"pattern": "incast", "senders": 3, "nbytes": "256KB"}}})
    return run_packet_scenario(sc)


def _inference() -> Any:
    from fabricsim.workloads.serving.static import simulate_inference

    return simulate_inference(get_model("llama2-7b"), _fab(1), tp=2, batch=4)


def _continuous() -> Any:
    from fabricsim.workloads.serving.batching import continuous_batching

    return continuous_batching(get_model("llama2-7b"), _fab(1), prompt_len=512,
                               output_len=128, tpot_target_s=0.05, tp=2)


def _trace() -> Any:
    from fabricsim.workloads.serving.batching import serve_requests

    return serve_requests(get_model("llama2-7b"), _fab(1), [(128, 16)] * 4, tp=2)


def _disaggregated() -> Any:
    from fabricsim.workloads.serving.disaggregated import disaggregated_serving

    return disaggregated_serving(get_model("llama2-7b"), _fab(2), prefill_tp=2, batch=8,
                                 prompt_len=512, output_len=64, tp=2)


def _goodput() -> Any:
    from fabricsim.workloads.training.goodput import goodput_on_fabric

    return goodput_on_fabric(_fab(), params=7e9, step_time_s=_step().step_time_s)


def _plan() -> Any:
    from fabricsim.workloads.training.planner import plan_parallel

    class Flat:
        def time(self, collective: str, ranks: Any, nbytes: float) -> float:
            return nbytes / 100e9

    return plan_parallel(get_model("llama2-7b"), _fab(), global_batch=32, seq_len=2048,
                         comm=Flat(), top=3)


def _fabric_option() -> Any:
    from fabricsim.workloads.cost.fabric_plan import compare_fabrics

    return compare_fabrics(get_model("llama2-7b"), system="dgx-h100", nodes=2,
                           fabrics=["ib-ndr"], cfg=ParallelConfig(seq_len=2048))[0]


def _capex() -> Any:
    from fabricsim.workloads.cost.capex import fabric_capex

    return fabric_capex(_fab())


def _calibration() -> Any:
    from fabricsim.interop.calibrate import CalibrationResult

    return CalibrationResult("dgx-h100", {"net.efficiency": 0.9}, {"net.efficiency": 0.01},
                             fitted_rows=10, held_out_rows=5, fit_error_before=0.2,
                             fit_error_after=0.05, held_out_error_before=0.25,
                             held_out_error_after=float("nan"), notes=("a note",))


def _diagnose() -> Any:
    from fabricsim.interop.diagnose import DiagnoseReport, Suspect

    return DiagnoseReport(suspects=(Suspect("leaf0", 1.8, 4, (("h0-h1", 1.8),)),
                                    Suspect("nic3", 1.1, 2, also=("cable3",))),
                          runs=6, baseline_ratio=1.0, identified=True)


def _summary() -> Any:
    from fabricsim.jobs.describe import summarize

    return summarize(_fab())


#: (factory, columns its DataFrame must have, rows) for every public result type
def _ep() -> Any:
    from fabricsim.collectives.ep import EpConfig, run_ep
    from fabricsim.fabric import build_cluster

    return run_ep(build_cluster("dgx-h100", 2), EpConfig(tokens=128, hidden=1024, top_k=4,
                                                         experts=16), "dispatch")


def _cluster() -> Any:
    from fabricsim.workloads.cluster import ClusterMember, interfere, place
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.training.parallel import ParallelConfig

    fab = _fab(4)
    cfg = ParallelConfig(tp=8, global_batch=16, seq_len=2048)
    members = [ClusterMember(n, 16, get_model("llama2-7b"), cfg) for n in "ab"]
    return interfere(fab, members, place(fab, [(m.name, 16, None) for m in members]))


def _replay() -> Any:
    from fabricsim.workloads.cluster import ClusterMember
    from fabricsim.workloads.jobtrace import parse_trace
    from fabricsim.workloads.models import get_model
    from fabricsim.workloads.replay import replay
    from fabricsim.workloads.training.parallel import ParallelConfig

    jobs, _ = parse_trace("name,submit_s,gpus,duration_s\na,0,16,600\nb,5,4,60\n")
    m, cfg = get_model("llama2-7b"), ParallelConfig(tp=8, seq_len=2048)
    return replay(_fab(4), jobs, lambda j, g: ClusterMember(j.name, g, m, cfg), hours=1)


CASES: dict[str, tuple[Callable[[], Any], set[str], int]] = {
    "ReplayResult": (_replay, {"job", "start_s", "end_s", "wait_s", "slowdown", "status",
                               "slowed_on"}, 2),
    "ClusterResult": (_cluster, {"job", "slowdown", "step_alone_s",
                                 "gpu_hours_lost_per_hour"}, 2),
    "EpResult": (_ep, {"kernel", "time_us", "headline_gbps", "limit"}, 1),
    "Result-analytic": (lambda: _collective().result,
                        {"time_s", "backend", "steps", "extra.protocol"}, 1),
    "Result-flow": (_flow_result, {"time_s", "bottleneck_kind", "extra.routing",
                                   "extra.faults"}, 1),
    "LinkReport": (lambda: _collective().result.top_links(_fab())[0],
                   {"link", "name", "kind", "bytes", "utilization"}, 1),
    "CollectiveResult": (_collective, {"time_s", "busbw_Bps", "algorithm",
                                       "result.backend"}, 1),
    "PacketRun": (_packet_run, {"summary.transport", "summary.drops.lossless",
                                "result.time_s"}, 1),
    "StepResult": (_step, {"step_time_s", "mfu", "parallel.tp", "breakdown.compute",
                           "memory_gib.total", "warnings"}, 1),
    "InferenceResult": (_inference, {"tpot_s", "ttft_s", "tokens_per_s",
                                     "decode_breakdown_s.comm_s"}, 1),
    "ContinuousResult": (_continuous, {"batch", "tpot_s", "limited_by",
                                       "tokens_per_s_per_gpu"}, 1),
    "TraceResult": (_trace, {"requests", "mean_itl_s", "tokens_per_s_per_gpu"}, 1),
    "DisaggregatedResult": (_disaggregated, {"kv_transfer_s", "prefill_ranks.0",
                                             "prefill_instances_per_decode"}, 1),
    "GoodputResult": (_goodput, {"goodput", "lost_fraction", "failures_per_day_gpu"}, 1),
    "Plan": (_plan, {"rank", "step_time_s", "parallel.tp"}, 3),
    "FabricOption": (_fabric_option, {"fabric", "capex.total_usd",
                                      "effective_tokens_per_s"}, 1),
    "FabricCapex": (_capex, {"total_usd", "by_kind_usd.switches", "items"}, 1),
    "MemoryEstimate": (lambda: _step().memory, {"weights", "total"}, 1),
    "CalibrationResult": (_calibration, {"factors.net.efficiency",
                                         "median_abs_time_error.held_out_after"}, 1),
    "DiagnoseReport": (_diagnose, {"rank", "component", "slowdown", "runs", "identified"},
                       2),
    "ClusterSummary": (_summary, {"gpus", "switches.leaf", "hierarchy_gbps.nvlink"}, 1),
}

def _flat_json(d: dict[str, Any]) -> None:
    assert d, "empty record"
    for k, v in d.items():
        assert isinstance(k, str)
        assert isinstance(v, SCALARS), (k, type(v))
        assert not (isinstance(v, float) and not math.isfinite(v)), k
    assert json.loads(json.dumps(d, allow_nan=False)) == d


@pytest.mark.parametrize("name", sorted(CASES))
def test_to_dict_is_flat_json(name: str) -> None:
    r = CASES[name][0]()
    assert Tabular in type(r).__mro__
    _flat_json(r.to_dict())


@pytest.mark.parametrize("name", sorted(CASES))
def test_to_pandas_has_the_columns(name: str) -> None:
    factory, columns, rows = CASES[name]
    r = factory()
    df = r.to_pandas()
    assert len(df) == rows
    assert columns <= set(df.columns), columns - set(df.columns)
    for rec in df.astype(object).where(df.notna(), None).to_dict(orient="records"):
        _flat_json({str(k): v.item() if isinstance(v, np.generic) else v
                    for k, v in rec.items()})
    if rows == 1:
        assert list(df.columns) == list(r.to_dict())


def test_nan_and_inf_become_none() -> None:
    d = CASES["CalibrationResult"][0]().to_pandas().iloc[0]
    assert d["median_abs_time_error.held_out_after"] is None or \
        math.isnan(d["median_abs_time_error.held_out_after"])
    assert flatten({"a": float("inf"), "b": np.float64("nan"), "c": np.int64(3),
                    "d": np.bool_(True)}) == {"a": None, "b": None, "c": 3, "d": True}


def test_flatten_shapes() -> None:
    out = flatten({"s": {"x": [1, 2]}, "tags": ("a", "b"), "none": [],
                   "arr": np.arange(3.0), "big": np.zeros(1000), "obj": object})
    assert out["s.x.0"] == 1 and out["s.x.1"] == 2
    assert out["tags"] == "a; b" and out["none"] == ""
    assert [out[f"arr.{i}"] for i in range(3)] == [0.0, 1.0, 2.0]
    assert not any(k.startswith("big") for k in out)
    assert out["obj"] == str(object)
    assert scalars({"a": np.zeros(2), "b": {"c": 1, "d": [1]}, "e": "x"}) == \
        {"b": {"c": 1}, "e": "x"}


def test_frame_of_many_results_and_rows() -> None:
    from fabricsim.collectives import run_collective

    sizes = [2**20, 2**24]
    df = frame(run_collective(_fab(), "all_gather", s) for s in sizes)
    assert len(df) == 2 and (df["time_s"].diff().dropna() > 0).all()
    rows = frame([{"gpus": 8, "t": {"s": 1.0}}, {"gpus": 16, "t": {"s": 0.5}}])
    assert list(rows.columns) == ["gpus", "t.s"]


def test_missing_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"fabricsim\[store\]"):
        _collective().to_pandas()
    with pytest.raises(ConfigError, match=r"fabricsim\[store\]"):
        frame([{"a": 1}])


def test_every_result_class_is_tabular() -> None:
    """A new ``*Result`` class anywhere in the package gets to_dict()/to_pandas() too."""
    import ast
    import importlib
    from pathlib import Path

    src = Path(fs.__file__).parent
    found = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Result") \
                    and not node.name.startswith("_"):
                mod = ".".join(path.relative_to(src.parent).with_suffix("").parts)
                found.append(getattr(importlib.import_module(mod), node.name))
    assert len(found) >= 8
    assert [c.__name__ for c in found if not issubclass(c, Tabular)] == []
    covered = {name.split("-")[0] for name in CASES}
    assert {c.__name__ for c in found} <= covered


def test_a_result_inside_a_record_is_flattened() -> None:
    out = flatten({"cluster": _summary(), "run": _collective()})
    _flat_json(out)
    assert out["cluster.gpus"] == 16 and out["run.result.backend"] == "analytic"
