import numpy as np
import pytest

from fabricsim.backends import IdealBackend, Result, dag_times, get_backend
from fabricsim.errors import UnknownPresetError
from fabricsim.fabric import build_cluster
from fabricsim.schedule import Schedule, Step


def test_dag_times_chain_and_parallel() -> None:
    s0 = Step(src=[0], dst=[1], nbytes=[1.0], repeat=2)
    s1 = Step(src=[1], dst=[0], nbytes=[1.0], deps=(0,), delay=0.5)
    s2 = Step(src=[0], dst=[1], nbytes=[1.0])
    start, end = dag_times(Schedule(steps=(s0, s1, s2)), lambda i: 1.0)
    assert end.tolist() == [2.0, 3.5, 1.0]
    assert start.tolist() == [0.0, 2.5, 0.0]


def test_ideal_backend_and_result_helpers() -> None:
    fab = build_cluster("dgx-h100", 1)
    st = Step(src=fab.gpus[:2], dst=fab.gpus[2:4], nbytes=np.array([1e6, 1e6]), repeat=3)
    r = IdealBackend(latency=2e-6).run(Schedule(steps=(st,)), fab)
    assert r.time == pytest.approx(6e-6)
    assert isinstance(r, Result)
    loaded = Result(time=1.0, backend="x", step_start=np.zeros(1), step_end=np.ones(1),
                    link_bytes=np.where(np.arange(fab.n_links) == 3, 1e9, 0.0))
    top = loaded.top_links(fab, 3)
    assert len(top) == 1 and top[0].link == 3
    assert top[0].utilization == pytest.approx(1e9 / fab.link_capacity[3])


def test_unknown_backend() -> None:
    with pytest.raises(UnknownPresetError, match="analytic"):
        get_backend("analytc")
