import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricsim.errors import ScheduleError
from fabricsim.schedule import Schedule, Step
from fabricsim.schedule.core import chain, merge_parallel


def step(n: int = 2, repeat: int = 1, deps: tuple[int, ...] = ()) -> Step:
    return Step(src=np.arange(n), dst=np.roll(np.arange(n), -1), nbytes=np.full(n, 10.0),
                repeat=repeat, deps=deps)


def test_bytes_and_transfers() -> None:
    s = Schedule(steps=(step(4, repeat=3), step(2, deps=(0,))))
    assert s.total_bytes() == 4 * 10 * 3 + 2 * 10
    assert s.n_transfers() == 14


def test_forward_dependency_rejected() -> None:
    with pytest.raises(ScheduleError, match="earlier"):
        Schedule(steps=(step(deps=(1,)), step()))


def test_negative_warp_or_channel_counts_rejected() -> None:
    with pytest.raises(ScheduleError, match="copy_warps"):
        Schedule(steps=(), copy_warps=-1)
    with pytest.raises(ScheduleError, match="tree_channels"):
        Schedule(steps=(), tree_channels=-2)


def test_copy_warps_bound_the_kernels_with_the_tightest_rate() -> None:
    s = Schedule(steps=(), nbytes=10**9, kernel_bytes_per_s=1e12, copy_warps=100)
    assert s.kernel_floor() == pytest.approx(1e-3)  # no warp rate: the kernel rate
    assert s.kernel_floor(warp_rate=2e9) == pytest.approx(5e-3)  # 100 warps x 2 GB/s
    assert s.kernel_floor(warp_rate=2e12) == pytest.approx(1e-3)
    assert Schedule(steps=(), nbytes=10**9).kernel_floor(warp_rate=2e9) == 0.0  # no warps
    assert s.timing_fields()["copy_warps"] == 100


def test_bad_steps() -> None:
    with pytest.raises(ScheduleError):
        Step(src=np.arange(2), dst=np.arange(3), nbytes=np.ones(2))
    with pytest.raises(ScheduleError):
        Step(src=np.arange(2), dst=np.arange(2), nbytes=np.array([1.0, -1.0]))
    with pytest.raises(ScheduleError):
        Step(src=np.arange(2), dst=np.arange(2), nbytes=np.ones(2), repeat=0)
    with pytest.raises(ScheduleError):
        Step(src=np.arange(2), dst=np.arange(2), nbytes=np.ones(2), reduce_at="nic")


def test_scalar_bytes_broadcast() -> None:
    s = Step(src=np.arange(3), dst=np.arange(3), nbytes=np.array([5.0]))
    assert s.nbytes.tolist() == [5.0, 5.0, 5.0]


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6),
       st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_merge_parallel_keeps_bytes_and_deps(a: list[int], b: list[int]) -> None:
    sa = Schedule(steps=tuple(chain([step(2, r) for r in a])))
    sb = Schedule(steps=tuple(chain([step(3, r) for r in b])))
    m = merge_parallel([sa, sb])
    assert m.total_bytes() == pytest.approx(sa.total_bytes() + sb.total_bytes())
    assert m.steps[len(a)].deps == ()  # second chain starts independently
    assert len(m.critical_path_steps()) == (len(a) if sum(a) >= sum(b) else len(b))
