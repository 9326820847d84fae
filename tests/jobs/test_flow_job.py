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


def test_a_flow_run_takes_the_collective_sections_nccl_variables() -> None:
    """simulate runs the collective section, so its env: reaches it as it reaches bench:
    NCCL_ALGO narrows NCCL's choice, NCCL_IB_QPS_PER_CONNECTION is the run's queue pairs
    (a --qps given replaces it), and a channel limit, which the flow backend does not
    run, is refused by name instead of ignored."""
    import pytest

    from fabricsim import jobs
    from fabricsim.errors import ConfigError
    from fabricsim.jobs.flow import flow_job
    from fabricsim.scenario import Scenario

    def scenario(env: dict[str, object]) -> Scenario:
        return Scenario.model_validate({
            "cluster": {"system": "dgx-h100", "nodes": 2},
            "collective": {"maxbytes": "64MiB", "env": env},
            "faults": [{"type": "slow_nic", "node": 0, "index": 0, "factor": 0.5}]})

    free = jobs.run(flow_job(scenario({}))).summary
    tree = jobs.run(flow_job(scenario({"NCCL_ALGO": "Tree",
                                       "NCCL_IB_QPS_PER_CONNECTION": 4}))).summary
    assert free["algorithm"] != "tree" and tree["algorithm"] == "tree"
    assert tree["qps"] == 4 and tree["nccl_env"]["NCCL_ALGO"] == "Tree"
    assert flow_job(scenario({"NCCL_IB_QPS_PER_CONNECTION": 4}), qps=2).qps == 2
    with pytest.raises(ConfigError, match="NCCL_MAX_NCHANNELS=4") as e:
        flow_job(scenario({"NCCL_MAX_NCHANNELS": 4}))
    assert e.value.field == "collective.env"
    # the CTAS pair sets channels too (NVLS's among them): refused alike, not ignored
    with pytest.raises(ConfigError, match="NCCL_MIN_CTAS=24") as e:
        flow_job(scenario({"NCCL_MIN_CTAS": 24}))
    assert e.value.field == "collective.env"


def test_a_flow_run_makes_the_choice_of_the_sections_nccl_release() -> None:
    """collective.nccl_version reaches simulate as it reaches bench (it was ignored): on
    64 DGX H200 over RoCE at 32 MiB NCCL 2.27.3 runs NVLSTree Simple (its log in NCCL
    issue 1752), the newest modelled release Tree LL128; the flow run builds the pair
    of the release the section names, as bench does."""
    from fabricsim import jobs
    from fabricsim.jobs.flow import flow_job
    from fabricsim.scenario import Scenario

    def pairs(release: str | None) -> tuple[tuple[str, str], tuple[str, str]]:
        sc = Scenario.model_validate({
            "cluster": {"system": "dgx-h200", "nodes": 64, "fabric": "roce-400g"},
            "collective": {"maxbytes": "32MiB", "nccl_version": release},
            "faults": [{"type": "slow_nic", "node": 0, "index": 0, "factor": 0.5}]})
        job = flow_job(sc)
        fab = job.cluster.build()
        row = jobs.run(jobs.job_from_scenario("bench", sc.model_copy(update={
            "faults": []}), sizes=(32 * 2**20,)), fab).rows[None][0]
        summary = jobs.run(job, fab).summary
        return (row.algorithm, row.protocol.lower()), (summary["algorithm"],
                                                       summary["protocol"])

    assert pairs("2.27.3") == (("nvlstree", "simple"),) * 2
    assert pairs(None) == (("tree", "ll128"),) * 2
