"""The flow job (``simulate``): what it refuses before any run."""

from __future__ import annotations


def test_extreme_faults_are_refused_by_the_job_itself_unless_forced() -> None:
    """issue 40: the CLI alone refused a link at 0.001 of its rate; a sweep and the web
    ran it. The job refuses it on every face; --force is the CLI's way through."""
    import pytest

    from fabricsim.errors import ConfigError
    from fabricsim.jobs.flow import flow_job
    from fabricsim.scenario import Scenario

    sc = Scenario.model_validate({
        "cluster": {"system": "dgx-h100", "nodes": 2},
        "collective": {"collective": "all_reduce", "maxbytes": "1MiB", "algo": "ring"},
        "faults": [{"type": "link_degraded", "kind": "leaf-spine", "index": 0,
                    "factor": 0.001}]})
    with pytest.raises(ConfigError, match="legal but extreme") as e:
        flow_job(sc)
    assert e.value.field == "faults[0].factor"
    assert flow_job(sc, force=True).force
