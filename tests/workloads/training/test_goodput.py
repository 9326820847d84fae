"""Goodput model: closed forms, the Young/Daly optimum, scaling, the Llama 3 conversion,
errors and JSON output."""

from __future__ import annotations

import json
import math
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from fabricsim.errors import ConfigError, ModelError
from fabricsim.workloads.training.goodput import (
    CHECKPOINT_BYTES_PER_PARAM,
    COMPONENT_CLASSES,
    LLAMA3_DAYS,
    LLAMA3_GPUS,
    LLAMA3_INTERRUPTIONS,
    LLAMA3_LINKS,
    LLAMA3_SERVERS,
    LLAMA3_SWITCHES,
    FailureRates,
    GoodputResult,
    checkpoint_size_bytes,
    goodput,
    young_daly_interval_s,
)

ONLY_GPU = FailureRates(gpu=2e-5, nic=0.0, link=0.0, switch=0.0, host=0.0, software=0.0)


def _run(**kw: Any) -> GoodputResult:
    args: dict[str, Any] = {"gpus": 1024, "switches": 48, "links": 3072, "step_time_s": 2.0,
                            "checkpoint_bytes": 1e12, "checkpoint_write_bytes_per_s": 1e11}
    args.update(kw)
    return goodput(**args)


def test_one_component_class_follows_closed_form() -> None:
    r = _run(gpus=1000, rates=ONLY_GPU, step_time_s=0.5, restart_s=300.0)
    assert r.job_mtbf_hours == pytest.approx(1.0 / (1000 * 2e-5))  # 50 h
    assert r.failures_per_day == pytest.approx(1000 * 2e-5 * 24)
    assert r.failures_per_day_by_class["gpu"] == pytest.approx(r.failures_per_day)
    assert all(r.failures_per_day_by_class[c] == 0.0 for c in COMPONENT_CLASSES if c != "gpu")
    m = 50 * 3600.0
    w = 1e12 / 1e11  # 10 s synchronous write
    assert r.checkpoint_write_s == r.checkpoint_blocking_s == pytest.approx(w)
    tau = r.checkpoint_interval_s
    assert tau == pytest.approx(math.sqrt(2 * w * m), abs=0.25)  # rounded to 0.5 s steps
    assert r.checkpoint_interval_steps * 0.5 == pytest.approx(tau)
    assert r.lost_checkpoint == pytest.approx(w / tau)
    assert r.lost_work == pytest.approx(tau / 2 / m)
    assert r.lost_restart == pytest.approx(300.0 / m)
    assert r.goodput == pytest.approx(1 - w / tau - tau / 2 / m - 300.0 / m)
    assert r.usd_lost_per_day == pytest.approx(1000 * 24 * 2.5 * (1 - r.goodput))


def test_units_per_class() -> None:
    # 12 GPUs on 8-GPU servers occupy 2 whole servers, 2 x 4 NICs
    rates = FailureRates(gpu=1e-5, nic=2e-5, link=3e-5, switch=4e-5, host=5e-5, software=6e-5)
    r = _run(gpus=12, nics_per_server=4, switches=3, links=20, rates=rates)
    assert (r.servers, r.nics) == (2, 8)
    expected = {"gpu": 12 * 1e-5, "nic": 8 * 2e-5, "link": 20 * 3e-5, "switch": 3 * 4e-5,
                "host": 2 * 5e-5, "software": 12 * 6e-5}
    for c, per_h in expected.items():
        assert r.failures_per_day_by_class[c] == pytest.approx(per_h * 24)
    assert r.job_mtbf_hours == pytest.approx(1 / sum(expected.values()))


def test_young_daly_interval_beats_nearby_intervals() -> None:
    for blocking in (1.0, 0.25):
        base = {"gpus": 4096, "switches": 192, "links": 12288, "step_time_s": 0.01,
                "checkpoint_blocking_fraction": blocking}
        best = _run(**base)
        tau = best.checkpoint_interval_s
        m = best.job_mtbf_hours * 3600
        assert tau == pytest.approx(young_daly_interval_s(best.checkpoint_blocking_s, m),
                                    abs=0.01)
        for f in (0.8, 0.9, 1.1, 1.2):
            other = _run(**base, checkpoint_interval_s=tau * f)
            assert other.goodput < best.goodput, f
        # a fine scan finds no better interval than the analytic one
        scan = [_run(**base, checkpoint_interval_s=tau * (0.5 + i / 100)).goodput
                for i in range(101)]
        assert max(scan) <= best.goodput + 1e-12


def test_young_daly_closed_form() -> None:
    assert young_daly_interval_s(50.0, 10_000.0) == pytest.approx(1000.0)
    assert young_daly_interval_s(0.0, 10_000.0) == 0.0


def test_goodput_falls_monotonically_with_world_size() -> None:
    last = 1.0
    last_failures = 0.0
    for gpus in (8, 64, 512, 2048, 8192, 16384, 32768, 65536):
        # fabric grows with the job: a 3-tier fat-tree's 3 links per NIC, 1 switch per 12.8
        r = _run(gpus=gpus, switches=gpus * 10 // 128, links=3 * gpus)
        assert r.goodput < last
        assert r.failures_per_day > last_failures
        last, last_failures = r.goodput, r.failures_per_day


def test_llama3_defaults_reproduce_the_papers_failure_rate() -> None:
    """Consistency check of the count -> per-unit-rate conversion, not a validation: the
    defaults were derived from this very cluster, so summing them back over its units must
    give Table 5's 419 interruptions in 54 days (7.76/day, one every 3.1 h)."""
    assert sum(n for _, _, n in LLAMA3_INTERRUPTIONS) == 419
    r = goodput(LLAMA3_GPUS, switches=LLAMA3_SWITCHES, links=LLAMA3_LINKS, step_time_s=6.0,
                checkpoint_bytes=checkpoint_size_bytes(405e9),
                checkpoint_write_bytes_per_s=2e12)
    assert r.servers == LLAMA3_SERVERS
    assert r.failures_per_day == pytest.approx(419 / LLAMA3_DAYS, rel=0.03)
    assert r.job_mtbf_hours == pytest.approx(LLAMA3_DAYS * 24 / 419, rel=0.03)
    by = r.failures_per_day_by_class
    assert by["gpu"] * LLAMA3_DAYS == pytest.approx(268)
    assert (by["switch"] + by["link"]) * LLAMA3_DAYS == pytest.approx(35)
    assert by["host"] * LLAMA3_DAYS == pytest.approx(46)
    assert by["software"] * LLAMA3_DAYS == pytest.approx(63)
    assert by["nic"] * LLAMA3_DAYS == pytest.approx(7)
    # Meta reports > 90 % effective training time; with 2 TB/s checkpoints (the paper's
    # Tectonic sustained throughput) and 10-minute restarts the model gives ~92 %
    assert 0.90 < r.goodput < 0.95


def test_assumed_fabric_counts_match_the_builder() -> None:
    import fabricsim as fs

    fab = fs.build_cluster("dgx-h100", LLAMA3_SERVERS, fabric="roce-400g",
                           topology="rail-optimized")
    assert sum(fab.info.extra["switches"].values()) == LLAMA3_SWITCHES
    assert sum(fab.info.cables.values()) == LLAMA3_LINKS


def test_async_checkpoints_cost_less_and_keep_intervals_valid() -> None:
    sync = _run(checkpoint_bytes=5e12)
    asyn = _run(checkpoint_bytes=5e12, checkpoint_blocking_fraction=0.1)
    assert asyn.checkpoint_blocking_s == pytest.approx(0.1 * sync.checkpoint_blocking_s)
    assert asyn.goodput > sync.goodput
    assert asyn.checkpoint_interval_s >= asyn.checkpoint_write_s - asyn.checkpoint_blocking_s
    # fully asynchronous: the interval is floored by the background write
    free = _run(checkpoint_bytes=5e12, checkpoint_blocking_fraction=0.0)
    assert free.lost_checkpoint == 0.0
    assert free.checkpoint_interval_s >= free.checkpoint_write_s


def test_checkpoint_size() -> None:
    assert CHECKPOINT_BYTES_PER_PARAM == 14.0
    assert checkpoint_size_bytes(405e9) == pytest.approx(5.67e12)
    assert checkpoint_size_bytes(1e9, bytes_per_param=16) == pytest.approx(16e9)


def test_rates_from_mtbf_and_frozen() -> None:
    r = FailureRates.from_mtbf_hours(gpu=50_000, switch=math.inf)
    assert r.gpu == pytest.approx(2e-5) and r.switch == 0.0
    assert r.nic == FailureRates().nic
    assert r.mtbf_hours()["switch"] == math.inf
    with pytest.raises(FrozenInstanceError):
        r.gpu = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(("kw", "field"), [
    ({"gpus": 0}, "gpus"),
    ({"gpus": -8}, "gpus"),
    ({"gpus": 8.5}, "gpus"),
    ({"gpus": True}, "gpus"),
    ({"gpus_per_server": 0}, "gpus_per_server"),
    ({"nics_per_server": -1}, "nics_per_server"),
    ({"switches": -1}, "switches"),
    ({"links": 2.0}, "links"),
    ({"step_time_s": 0.0}, "step_time_s"),
    ({"step_time_s": float("nan")}, "step_time_s"),
    ({"checkpoint_bytes": -1.0}, "checkpoint_bytes"),
    ({"checkpoint_bytes": float("inf")}, "checkpoint_bytes"),
    ({"checkpoint_write_bytes_per_s": 0}, "checkpoint_write_bytes_per_s"),
    ({"restart_s": -1.0}, "restart_s"),
    ({"restart_s": float("nan")}, "restart_s"),
    ({"checkpoint_interval_s": 0.0}, "checkpoint_interval_s"),
    ({"checkpoint_interval_s": 1.0}, "checkpoint_interval_s"),  # shorter than a 2 s step
    ({"checkpoint_blocking_fraction": 1.5}, "checkpoint_blocking_fraction"),
    ({"checkpoint_blocking_fraction": -0.1}, "checkpoint_blocking_fraction"),
    ({"gpu_hour_usd": float("nan")}, "gpu_hour_usd"),
    ({"gpu_hour_usd": "2.5"}, "gpu_hour_usd"),
    ({"rates": {"gpu": 1e-5}}, "rates"),
    ({"rates": FailureRates(0, 0, 0, 0, 0, 0)}, "rates"),
])
def test_invalid_inputs_name_their_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        _run(**kw)
    assert e.value.field == field
    assert field in str(e.value)


def test_async_interval_shorter_than_background_write_is_refused() -> None:
    with pytest.raises(ConfigError, match="asynchronous write") as e:
        _run(checkpoint_bytes=1e13, checkpoint_blocking_fraction=0.1,
             checkpoint_interval_s=10.0)
    assert e.value.field == "checkpoint_interval_s"


@pytest.mark.parametrize(("kw", "field"), [
    ({"gpu": float("nan")}, "rates.gpu"),
    ({"link": -1e-6}, "rates.link"),
    ({"host": float("inf")}, "rates.host"),
])
def test_invalid_rates(kw: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        FailureRates(**kw)
    assert e.value.field == field


def test_invalid_mtbf_and_checkpoint_size() -> None:
    with pytest.raises(ConfigError, match="did you mean 'switch'"):
        FailureRates.from_mtbf_hours(switches=1e5)
    with pytest.raises(ConfigError) as e:
        FailureRates.from_mtbf_hours(gpu=0)
    assert e.value.field == "rates.gpu"
    with pytest.raises(ConfigError) as e:
        checkpoint_size_bytes(float("nan"))
    assert e.value.field == "params"
    with pytest.raises(ConfigError) as e:
        young_daly_interval_s(1.0, 0.0)
    assert e.value.field == "mtbf_s"


def test_hopeless_job_is_a_model_error() -> None:
    bad = FailureRates(gpu=1.0, nic=0, link=0, switch=0, host=0, software=0)  # 1/h per GPU
    with pytest.raises(ModelError, match="would not progress"):
        _run(rates=bad)


def test_to_dict_is_flat_and_json_safe() -> None:
    r = _run()
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back == d
    assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in d.values())
    for c in COMPONENT_CLASSES:
        assert back[f"failures_per_day_{c}"] == pytest.approx(r.failures_per_day_by_class[c])
    assert back["goodput"] == pytest.approx(1 - back["lost_fraction"])
    assert back["lost_fraction"] == pytest.approx(
        back["lost_checkpoint"] + back["lost_work"] + back["lost_restart"])
    # zero-priced GPUs and a zero restart still give finite, JSON-safe output
    json.dumps(_run(gpu_hour_usd=0, restart_s=0, gpus=1, switches=0, links=0).to_dict(),
               allow_nan=False)


def test_an_nvl72_rack_counts_its_compute_trays_as_hosts() -> None:
    """The host rate is per two-socket Llama 3 server; a GB200 NVL72 rack (36 Grace CPUs)
    is 18 such hosts, not one (576 GPUs: 0.0033 -> 0.06 host failures a day, as many as
    72 DGX H100 for the same GPUs would have within 2x)."""
    from fabricsim.fabric import build_cluster
    from fabricsim.workloads.training.goodput import goodput_on_fabric

    rack = goodput_on_fabric(build_cluster("gb200-nvl72", 8), params=70e9, step_time_s=5.0)
    dgx = goodput_on_fabric(build_cluster("dgx-h100", 72), params=70e9, step_time_s=5.0)
    r_host, d_host = (x.failures_per_day_by_class["host"] for x in (rack, dgx))
    assert r_host == pytest.approx(d_host * 144 / 72)  # 8 x 18 hosts against 72


def test_a_job_that_cannot_progress_names_the_input_behind_it() -> None:
    from fabricsim.errors import ModelError

    kw = dict(switches=0, links=0, step_time_s=1.0, checkpoint_bytes=1e12)
    with pytest.raises(ModelError) as e:
        goodput(100_000, checkpoint_write_bytes_per_s=1e6, **kw)  # type: ignore[arg-type]
    assert e.value.field == "checkpoint_write_bytes_per_s"
    with pytest.raises(ModelError) as e:
        goodput(100_000, checkpoint_write_bytes_per_s=1e12, restart_s=1e9,
                **kw)  # type: ignore[arg-type]
    assert e.value.field == "restart_s"
