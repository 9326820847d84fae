"""benchmarks/fit_collectives.py: the parameter round trip and the linear model's choice."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_module import load

from fabricsim.protocols import PROTOCOLS


def test_parameters_round_trip_to_the_library_constants() -> None:
    f = load("fit_collectives")
    protos = f.apply(f.x0())
    for name in ("ll", "ll128", "simple"):
        a, b = protos[name], PROTOCOLS[name]
        assert np.allclose(a.hop_array(), b.hop_array(), rtol=1e-12)
        assert np.allclose(a.eff_array(), b.eff_array(), rtol=1e-12)
        assert np.isclose(a.launch, b.launch) and np.isclose(a.ramp_bytes, b.ramp_bytes)
        assert (a.launch_per_gpu, a.ramp_power) == pytest.approx(
            (b.launch_per_gpu, b.ramp_power))


def test_moving_one_parameter_moves_only_its_constant() -> None:
    f = load("fit_collectives")
    names = [f"{p}.{w}" for p, w, _ in f.PARAMS]
    x = f.x0()
    x[names.index("simple.net_hop")] += 10.0
    protos = f.apply(x)
    assert protos["simple"].hop_latency["net"] == pytest.approx(
        PROTOCOLS["simple"].hop_latency["net"] + 1e-5)
    assert protos["simple"].hop_latency["sharp"] == protos["simple"].hop_latency["net"]
    assert np.allclose(protos["ll"].hop_array(), PROTOCOLS["ll"].hop_array(), rtol=1e-12)


def test_the_linear_model_takes_the_fastest_candidate_and_the_host_floor() -> None:
    f = load("fit_collectives")
    k = len(f.PARAMS)
    x = f.x0()
    jac = np.zeros((3, k))
    jac[1, 0] = 1e-6   # candidate 1 of row 0 grows with the launch
    tab = f.Table(x_ref=x, row=np.array([0, 0, 1]), t0=np.array([15e-6, 14e-6, 9e-6]),
                  jac=jac, extra_gpus=np.array([0.0, 7.0]),
                  measured_s=np.array([14e-6, 9e-6]), source=["a", "b"],
                  group=["one server, latency"] * 2, use=np.array([True, True]))
    lpg = x[f._LPG] * 1e-6
    assert 8 * lpg > 9e-6  # row 1 (-g 8): the host's issue time of eight GPUs, not 9 us
    assert np.allclose(f.predict(tab, x), [14e-6, 8 * lpg])
    tab.t0[2] = 60e-6  # the GPUs' time longer than the host's: it shows through whole
    assert np.isclose(f.predict(tab, x)[1], 60e-6)
    x2 = x.copy()
    x2[0] += 2.0   # the launch: candidate 1 now 16 us, candidate 0 wins at 15 us
    assert np.isclose(f.predict(tab, x2)[0], 15e-6)
    assert np.isclose(f.errors(tab, x)[0], 0.0)
