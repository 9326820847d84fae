import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricsim.errors import UnitError
from fabricsim.units import format_bytes, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize(("text", "expected"), [
    ("400Gbps", 50e9), ("400Gb/s", 50e9), ("64GB/s", 64e9), ("900GBps", 900e9),
    ("100 Mbps", 12.5e6), (1e9, 1e9),
])
def test_bandwidth(text: str, expected: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize(("text", "expected"), [
    ("1MiB", 2**20), ("4GB", 4 * 10**9), ("128", 128), ("1.5KiB", 1536), (7, 7),
])
def test_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("1.5us", 1.5e-6), ("200ns", 2e-7), ("2ms", 2e-3), ("3s", 3.0), ("1µs", 1e-6),
])
def test_time(text: str, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["fast", "-3GB", "1XB", ""])
def test_bad_size_names_the_fix(bad: str) -> None:
    with pytest.raises(UnitError) as e:
        parse_size(bad, field="collective.maxbytes")
    assert "collective.maxbytes" in str(e.value)


def test_negative_and_zero_bandwidth_rejected() -> None:
    with pytest.raises(UnitError):
        parse_bandwidth(0)
    with pytest.raises(UnitError):
        parse_time(-1.0)


@given(st.integers(min_value=0, max_value=2**50))
def test_size_roundtrip_numbers(n: int) -> None:
    assert parse_size(n) == n
    assert parse_size(str(n)) == n


def test_format_bytes() -> None:
    assert format_bytes(3 * 2**30) == "3 GiB"
    assert format_bytes(12) == "12 B"
