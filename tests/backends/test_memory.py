"""Runs that would not fit in memory are refused before any work (fabricsim.backends.memory)."""

from __future__ import annotations

import pytest

from fabricsim.backends import memory
from fabricsim.backends.analytic import AnalyticBackend
from fabricsim.collectives.api import build_schedule
from fabricsim.errors import ConfigError
from fabricsim.fabric import build_cluster


def test_check_fits_refuses_past_the_limit_and_names_the_fix() -> None:
    memory.check_fits(2**20, "x", ["y"], limit=2**30)  # fits: nothing happens
    with pytest.raises(ConfigError) as e:
        memory.check_fits(3 * 2**30, "routing 9 transfers", ["fewer ranks", "fewer QPs"],
                          limit=2**30, field="ranks")
    assert e.value.field == "ranks"
    assert "3.0 GiB" in e.value.message and "1.0 GiB is the limit" in e.value.message
    assert "fewer ranks; or fewer QPs" in e.value.message


def test_available_memory_is_read() -> None:
    assert memory.available_bytes() > 0


def test_analytic_backend_refuses_a_group_too_big_for_the_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fab = build_cluster("dgx-h100", 4, fabric="roce-400g", params={"qps": 4})
    sch = build_schedule(fab, "alltoall", 2**24, algo="direct")
    assert AnalyticBackend().run(sch, fab).time > 0  # fits as it is
    monkeypatch.setattr(memory, "CHECK_ABOVE_TRANSFERS", 0)
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000)
    with pytest.raises(ConfigError) as e:
        AnalyticBackend().run(sch, fab)
    assert e.value.field == "params.qps"
    assert "4 queue pairs per connection" in e.value.message
    assert "NCCL_IB_QPS_PER_CONNECTION" in e.value.message


def test_out_of_memory_past_the_estimates_is_a_clean_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from fabricsim.cli import app as cli

    def boom(*a: object, **k: object) -> None:
        raise MemoryError("Unable to allocate 1.49 GiB")

    monkeypatch.setattr(cli, "app", boom)
    assert cli.main(["describe"]) == 2
    err = capsys.readouterr().err
    assert "out of memory (Unable to allocate 1.49 GiB)" in err and "Traceback" not in err
