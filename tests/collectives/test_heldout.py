"""The held-out error band, the envelope warning and the nearest published rows
(fabricsim.collectives.accuracy).

The shipped table must be what benchmarks/accuracy_nccl.py computes from the model as it
is: a change to the model that moves its error shows here until the table is rewritten
(``python benchmarks/accuracy_nccl.py --write-heldout``). The issue-34 targets are pinned
as expected failures, so the model's held-out error is visible in the test report and a
fix that meets one turns its test into an unexpected pass.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from benchmark_module import load
from typer.testing import CliRunner

from fabricsim.cli.app import app
from fabricsim.collectives.accuracy import (
    MIN_CHOICE_SOURCES,
    MIN_ROWS,
    Band,
    band,
    choice_band,
    choice_group,
    envelope_warning,
    group_of,
    heldout,
    local_evidence,
    local_key,
    local_warning,
    size_band_of,
)
from fabricsim.fabric import build_cluster

Fitted = tuple[ModuleType, list[Any], list[float], dict[str, Any]]


@pytest.fixture(scope="module")
def fitted() -> Fitted:
    b = load("accuracy_nccl")
    cs = b.all_cases()
    errors, fit = b.heldout_errors(cs)
    return b, cs, errors, fit


@pytest.fixture(scope="module")
def computed(fitted: Fitted) -> tuple[ModuleType, dict[str, Any]]:
    b, cs, errors, _ = fitted
    return b, b.heldout_table(cs, errors)


def test_library_crossing_cost_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # the held-out table predicts each source with the value fitted without it; what a
    # user gets is the library's, which must be the value fitted on every source
    from fabricsim.protocols import PROTOCOLS

    fit = fitted[3]
    for p in ("ll", "ll128", "simple"):
        assert PROTOCOLS[p].crossing_per_channel * 1e6 == pytest.approx(fit["all_us"])


def test_library_nvlink5_share_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # Simple's share of NVLink 5 is fitted on several published Blackwell sources, each
    # predicted held out with the value fitted without it; the library's is the value
    # fitted on all of them, and no one source decides it
    from fabricsim.protocols import PROTOCOLS

    nv5 = fitted[3]["nvlink5"]
    assert PROTOCOLS["simple"].nvlink_scale["nvlink5"] == pytest.approx(nv5["all"])
    assert nv5["sources"] >= 3
    assert all(abs(v - nv5["all"]) <= 0.04 + 1e-9 for v in nv5["loso"].values())


def test_library_ring_step_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # Simple's NVLink step on a ring is fitted on the fixed time of the published one-server
    # ring curves; no one source decides it
    from fabricsim.protocols import PROTOCOLS

    rs = fitted[3]["ring_step"]
    assert PROTOCOLS["simple"].fixed_step_latency["nvlink"] * 1e6 == pytest.approx(rs["all"])
    assert rs["sources"] >= 5 and rs["curves"] >= 8
    assert all(abs(v - rs["all"]) <= 0.5 for v in rs["loso"].values())


def test_library_ampere_ll128_factor_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # LL128's factor on NVLink 3 (A100) is fitted on the LL128 rows of every source run
    # with one process per GPU, none deciding it alone: the library's value is that fit,
    # and no source left out pushes the fit to an edge of its grid
    from fabricsim.protocols import PROTOCOLS

    b, cs, _, fit = fitted
    amp = fit["ampere_ll128"]
    assert PROTOCOLS["ll128"].nvlink_scale["nvlink3"] == pytest.approx(amp["all"])
    assert amp["sources"] >= 5 and amp["rows"] >= 100
    lo, hi = min(b.AMPERE_LL128_GRID), max(b.AMPERE_LL128_GRID)
    assert all(lo < v < hi for v in amp["loso"].values())
    assert all(cs[i].gpus_per_thread == 1 for i in b.ampere_ll128_rows(cs))


def test_library_nvlstree_channel_rate_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # NVLSTree's bus bandwidth per NVLS channel from 4 servers on is fitted on the runs of
    # NCCL's own channels there (every source whose rows the grid moves), each left out
    from fabricsim.protocols import PROTOCOLS

    b, cs, _, fit = fitted
    nc = fit["nvlstree_channel"]
    assert PROTOCOLS["simple"].nvlstree_channel_rate / 1e9 == pytest.approx(nc["all"])
    moved = [s for s, v in nc["by_source"].items() if v is not None]
    assert len(moved) >= 2 and nc["rows"] >= 20
    assert all(abs(v - nc["all"]) <= 2.0 for v in nc["loso"].values())
    # runs that set NCCL_MIN_CTAS / NCCL_MAX_CTAS change NCCL's NVLS channels, and the
    # model's with them: their rows count in the fit, at the channels they ran
    assert any(k.endswith("_CTAS") for i in b.nvlstree_channel_rows(cs)
               for k, _ in cs[i].env)


def test_library_mnnvl_step_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # the step between a rack's hosts (multi-node NVLink) is fitted on the rows of every
    # source whose GPUs sit on several trays of one NVLink domain; no one source decides it
    from fabricsim.protocols import PROTOCOLS

    mn = fitted[3]["mnnvl"]
    for p in ("ll", "ll128", "simple"):
        assert PROTOCOLS[p].mnnvl_step * 1e6 == pytest.approx(mn["all"])
    assert mn["sources"] >= 5 and mn["rows"] >= 100
    assert all(abs(v - mn["all"]) <= 0.25 + 1e-9 for v in mn["loso"].values())
    # the sources that move it at all ask for a cost: without one the fit would be 0
    assert mn["all"] > 0 and sum(1 for v in mn["by_source"].values() if v) >= 3


def test_library_mnnvl_nvls_stages_are_the_fit_on_every_source(fitted: Fitted) -> None:
    # the NVLS stages a rack's hosts add to a fill are fitted, together with the step
    # between hosts, on the rows of every source whose GPUs sit on several trays of one
    # NVLink domain: the fit is inside its grid and more than one source asks for stages
    # at all. Left out, CoreWeave's GB200 racks move it by two stages (to 4.5, the value
    # before their 20 racks were corrected to NVLS off and NVLSTree's warps refit,
    # 2026-12-03); every other source left out gives the fit on all (6.5 since an
    # all-to-all's remote peers cost the proxy's posts, 2026-12-04: 6.0 before, when OCI's
    # GB300 rack and Together's GB200 rack each moved it by half a stage): one source
    # weighs more here than elsewhere, and the test says so rather than hide it
    from fabricsim.protocols import PROTOCOLS

    mk = fitted[3]["mnnvl_nvls"]
    assert PROTOCOLS["simple"].mnnvl_nvls_stages == pytest.approx(mk["all"])
    assert mk["sources"] >= 5 and mk["rows"] >= 100
    grid = fitted[0].MNNVL_NVLS_GRID
    assert min(grid) < mk["all"] < max(grid)
    assert all(abs(v - mk["all"]) <= 2.0 + 1e-9 for v in mk["loso"].values())
    assert sum(1 for v in mk["loso"].values() if abs(v - mk["all"]) > 0.5 + 1e-9) <= 1
    assert sum(1 for v in mk["loso"].values() if v != mk["all"]) <= 3
    assert sum(1 for v in mk["by_source"].values() if v) >= 3


@pytest.mark.parametrize("algo", ["nvls", "nvlstree"])
def test_library_nvls_warp_rates_are_the_fit_on_every_source(fitted: Fitted,
                                                              algo: str) -> None:
    # Blackwell's NVLS and NVLSTree move at their copy warps' pace: each algorithm's rate
    # per warp is fitted on the held-out rows where NCCL runs it on Blackwell GPUs (for
    # NVLSTree with the rack rows its fill's stages are fitted on), seven sources or more
    # each; the fit is inside its grid, no source left out moves it by more than 0.2 GB/s,
    # and at least five sources move it
    from fabricsim.protocols import PROTOCOLS

    nw = fitted[3]["nvls_warp" if algo == "nvls" else "nvlstree_warp"]
    assert PROTOCOLS["simple"].nvls_warp_rate[algo] / 1e9 == pytest.approx(nw["all"])
    assert nw["sources"] >= 6 and nw["rows"] >= 40
    grid = fitted[0].NVLS_WARP_GRID_GBS
    assert min(grid) < nw["all"] < max(grid)
    assert all(abs(v - nw["all"]) <= 0.2 + 1e-9 for v in nw["loso"].values())
    assert sum(1 for v in nw["by_source"].values() if v) >= 5


def test_library_plugin_share_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # the share of aws-ofi-nccl's declared latency each crossing pays is fitted on the rows
    # of every EFA source of several servers; no one source decides it, and the fit is
    # inside its grid (not at an edge)
    from fabricsim.protocols import PROTOCOLS

    b = fitted[0]
    pl = fitted[3]["plugin"]
    for p in ("ll", "ll128", "simple"):
        assert PROTOCOLS[p].plugin_latency_share == pytest.approx(pl["all"])
    assert pl["sources"] >= 5 and pl["rows"] >= 100
    assert all(abs(v - pl["all"]) <= 0.02 + 1e-9 for v in pl["loso"].values())
    assert min(b.PLUGIN_GRID) < pl["all"] < max(b.PLUGIN_GRID)


def test_library_tree_ll128_rate_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # LL128's rate per channel of a tree between servers is fitted on the rows of every
    # source where NCCL runs such a tree (A100, H100, B200 over IB, RoCE and EFA); no one
    # source decides it, it is inside its grid, and the sources that move it want a bound
    from fabricsim.protocols import PROTOCOLS

    b = fitted[0]
    tr = fitted[3]["tree_ll128"]
    assert PROTOCOLS["ll128"].tree_channel_rate / 1e9 == pytest.approx(tr["all"])
    assert tr["sources"] >= 8 and tr["rows"] >= 80
    assert all(abs(v - tr["all"]) <= 1.0 + 1e-9 for v in tr["loso"].values())
    assert min(b.TREE_LL128_GRID_GBS) < tr["all"] < max(b.TREE_LL128_GRID_GBS)
    moved = [v for v in tr["by_source"].values() if v is not None]
    assert len(moved) >= 5 and max(moved) < max(b.TREE_LL128_GRID_GBS)


def test_library_hopper_ll_step_is_the_fit_on_every_source(fitted: Fitted) -> None:
    # LL's NVLink step on Hopper (x 0.6) is fitted on the LL rows of one Hopper server of
    # every source (p5, DGX Cloud, Together's H100, an H20): no one source decides it,
    # it is inside its grid, and every source left out gives the same
    from fabricsim.protocols import PROTOCOLS

    b = fitted[0]
    ls = fitted[3]["ll_step"]
    assert PROTOCOLS["ll"].hop_scale["nvlink4"] == pytest.approx(ls["all"])
    assert ls["sources"] >= 4 and ls["rows"] >= 80
    assert min(b.LL_STEP_GRID) < ls["all"] < max(b.LL_STEP_GRID)
    assert all(v == ls["all"] for v in ls["loso"].values())
    assert "nvlink3" not in PROTOCOLS["ll"].hop_scale  # A100's sources disagree: not fitted


def test_blackwell_ll_step_is_what_its_rows_give(fitted: Fitted) -> None:
    # GB200 trays of one rack (Google's A4X pages) took 1.6 us per LL ring step where the
    # library charged about 0.4, and Azure's single trays agreed with the library: the
    # cost is the step between a rack's hosts (Protocol.mnnvl_step). With it, the factor
    # on LL's NVLink 5 step that those rows ask for is the library's, 1, on all of them
    # and with each left out
    from fabricsim.protocols import PROTOCOLS

    b, cs, _, _ = fitted
    bll = b.blackwell_ll_fit(cs)
    assert bll["sources"] >= 4 and bll["rows"] >= 40
    assert bll["library"] == PROTOCOLS["ll"].hop_scale.get("nvlink5", 1.0)
    assert bll["all"] == bll["library"]
    assert all(abs(v - bll["library"]) <= 0.5 for v in bll["loso"].values())


def _mid_ring(fitted: Fitted) -> tuple[list[dict[str, Any]], list[float]]:
    b, cs, errors, _ = fitted
    curves = b.ring_curves(cs, errors)
    return curves, [c["model_32_128MiB"] for c in curves if c["model_32_128MiB"] is not None]


def test_measured_ring_curves_are_a_fixed_time_plus_bytes_over_a_rate(fitted: Fitted) -> None:
    # the published ring/Simple curves from 1 MiB up fit t = a + S / bw closely: the
    # evidence that the ring's mid-size cost is a fixed time, not a power law of the size
    import statistics

    curves, _ = _mid_ring(fitted)
    assert len(curves) >= 20 and len({c["source"] for c in curves}) >= 15
    assert statistics.median(c["linear_within"] for c in curves) <= 0.06


def test_rings_at_32_to_128_mib_are_not_slow(fitted: Fitted) -> None:
    # with Simple's power-law ramp on rings the model was 21 % slow here (median of 23
    # curves); a ring's steps now cost a fixed time each
    import statistics

    _, mid = _mid_ring(fitted)
    assert len(mid) >= 15
    assert abs(statistics.median(mid)) <= 0.10


def test_shipped_table_is_what_the_model_gives_now(
        computed: tuple[ModuleType, dict[str, Any]]) -> None:
    _, table = computed
    assert json.loads(json.dumps(table)) == heldout()


def test_no_fitted_source_counts_as_held_out(
        computed: tuple[ModuleType, dict[str, Any]]) -> None:
    b, table = computed
    fitted = set(table["held_out_from"])
    assert "Azure/AI-benchmarking-guide Azure_Results/ND_H100_v5_results.md" in fitted
    # the same pages vendored again among the published rows are fitted too
    assert {"azure-aibg-nda100v4", "azure-aibg-ndh100v5"} <= fitted
    held = [c for c in b.all_cases() if c.source not in fitted and not c.secondary]
    assert sum(g["rows"] for k, g in table["groups"].items()
               if not k.startswith(("all scopes", "several", "one server, 1-16"))) == len(held)


def test_groups_follow_scope_and_size() -> None:
    assert group_of(build_cluster("dgx-h100", 1), "all_reduce", 2**30) == \
        "one server, bandwidth"
    assert group_of(build_cluster("aws-p5", 2), "all_reduce", 1024) == "EFA, latency"
    assert group_of(build_cluster("dgx-h100", 2), "alltoall", 2**30) == \
        "InfiniBand, all-to-all"
    gb = build_cluster("gb200-nvl72", 2, gpus_per_node=16)
    assert group_of(gb, "all_reduce", 2**30) == "NVLink racks, bandwidth"


def test_a_thin_group_borrows_its_kind_over_all_scopes() -> None:
    fab = build_cluster("hgx-h20", 2)  # RoCE: one all-to-all row
    assert heldout()["groups"]["RoCE, all-to-all"]["rows"] < MIN_ROWS
    b = band(fab, "alltoall", 2**30)
    assert b.group == "all scopes, all-to-all" and b.rows >= MIN_ROWS
    assert b.label().startswith("± ")


def test_local_rows_are_those_of_the_nics_as_run() -> None:
    # three A100 servers with four 200G NICs each (nccl-tests#119) do not speak for the
    # eight-NIC preset a user builds: their -27 % is the 4-NIC variant's
    t = heldout()["local"]
    assert "dgx-a100-4x200g|3|bandwidth" in t and "dgx-a100|3|bandwidth" not in t
    near = local_evidence(build_cluster("dgx-a100", 3), "all_reduce", 124 * 2**20)
    assert near is None or (near.system == "dgx-a100" and near.servers != 3)
    assert local_warning(build_cluster("dgx-a100", 3), "all_reduce", 124 * 2**20) is None
    # on one server the NICs carry nothing: a NIC variant's rows count for its preset
    assert not any(k.split("|")[1] == "1" and k.startswith("gb300-nvl72-") for k in t)
    assert t["gb300-nvl72|1|bandwidth"]["rows"] > 15


def test_envelope_names_what_is_missing() -> None:
    assert envelope_warning(build_cluster("dgx-h100", 4), [2**20, 2**33]) is None
    far = envelope_warning(build_cluster("dgx-h100", 64), [2**30])
    assert far is not None and "64 servers" in far
    big = envelope_warning(build_cluster("dgx-h100", 2), [2**40])
    assert big is not None and "bytes" in big
    other = envelope_warning(build_cluster("pcie-8gpu", 2), [2**20])
    assert other is not None and "pcie-8gpu" in other


def test_bench_prints_the_band_and_the_warning() -> None:
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "dgx-h100",
                                 "--nodes", "64", "-b", "1G", "-e", "1G"])
    assert r.exit_code == 0, r.output
    assert "# accuracy, InfiniBand, bandwidth: ± " in r.output
    assert "# warning: no published run of dgx-h100 near 64 servers" in r.output
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "dgx-h100",
                                 "--nodes", "2", "-b", "1K", "-e", "1G", "-f", "1024",
                                 "--json"])
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert [x["band_group"] for x in rows] == ["InfiniBand, latency",
                                               "InfiniBand, bandwidth",
                                               "InfiniBand, bandwidth"]
    assert all(0 < x["band"] < 5 and x["envelope"] == "" for x in rows)


def test_choice_groups_hold_the_same_rows_as_the_scope_groups(
        computed: tuple[ModuleType, dict[str, Any]]) -> None:
    _, table = computed
    per_kind: dict[str, int] = {}
    for name, g in table["by_choice"].items():
        kind = name.split(", ")[1]
        per_kind[kind] = per_kind.get(kind, 0) + g["rows"]
    assert per_kind == {k: table["groups"][f"all scopes, {k}"]["rows"] for k in per_kind}
    # the same rows again, per band of sizes: each within its band, none lost
    per_key: dict[str, int] = {}
    for key, g in table["local_sizes"].items():
        pooled, band_ = key.rsplit("|", 1)
        per_key[pooled] = per_key.get(pooled, 0) + g["rows"]
        assert size_band_of(g["min_bytes"]) == size_band_of(g["max_bytes"]) == int(band_)
        assert g["low"] <= g["signed_median"] <= g["high"]
    assert per_key == {k: g["rows"] for k, g in table["local"].items()}


def test_after_source_level_holds_the_same_rows_and_removes_only_levels(
        fitted: Fitted, computed: tuple[ModuleType, dict[str, Any]]) -> None:
    b, cs, errors, _ = fitted
    _, table = computed
    left = b.after_source_level(cs, errors)
    assert {g: (v["rows"], v["sources"]) for g, v in left.items()} == \
        {g: (v["rows"], v["sources"]) for g, v in table["groups"].items()}
    for g, v in left.items():
        # a source's own level is its signed median: what is left has none to speak of
        assert abs(v["signed_median"]) <= max(0.02, table["groups"][g]["median"]), g
    # a row shifted by its source's level alone is left with no error
    rows = [c for c in cs if c.source == "nccl-tests#309-qoofyk"][:3]
    one = b.after_source_level(rows, [0.1, 0.1, 0.1])
    assert all(v["median"] == 0.0 and v["level_median"] == 0.1 for v in one.values())


def test_choice_groups_name_what_nccl_runs() -> None:
    two = build_cluster("dgx-h100", 2)
    assert choice_group(two, "all_reduce", 2**20, "tree", "ll128") == \
        "several servers, bandwidth, tree/LL128"
    assert choice_group(build_cluster("dgx-h100", 1), "all_reduce", 8, "ring", "ll") == \
        "one server, latency, ring/LL"
    assert choice_group(two, "alltoall", 2**30, "direct", "simple", servers=1) == \
        "one server, all-to-all, direct/Simple"


def test_a_choice_band_needs_rows_from_several_sources() -> None:
    table = heldout()["by_choice"]
    thin = [k for k, g in table.items() if g["rows"] >= MIN_ROWS
            and g["sources"] < MIN_CHOICE_SOURCES]
    assert "several servers, latency, ring/Simple" in thin  # one source only
    two = build_cluster("dgx-h100", 2)
    assert choice_band(two, "all_reduce", 2**16, "ring", "simple") is None
    b = choice_band(two, "all_reduce", 2**24, "tree", "ll128")
    assert b is not None and b.sources >= MIN_CHOICE_SOURCES and b.rows >= MIN_ROWS
    assert b.signed_median == table[b.group]["signed_median"]


def test_the_lean_reads_the_right_way_for_time_and_bandwidth() -> None:
    fast_bw = Band("several servers, bandwidth, tree/LL128", 0.3, 1.0, 59, 7, 0.29)
    assert "faster than measured" in fast_bw.lean()
    long_time = Band("several servers, latency, tree/LL", 0.2, 0.5, 114, 7, 0.2)
    assert "slower than measured" in long_time.lean()  # time above the measured one
    assert "no lean" in Band("x, bandwidth", 0.1, 0.4, 50, 5, -0.01).lean()


def test_bench_says_how_its_choice_has_fared() -> None:
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "dgx-h100",
                                 "--nodes", "4", "-b", "1M", "-e", "1G", "-f", "8"])
    assert r.exit_code == 0, r.output
    tree = choice_band(build_cluster("dgx-h100", 4), "all_reduce", 2**20, "tree", "ll128")
    assert tree is not None
    assert (f"# accuracy, several servers, bandwidth, tree/LL128: ± "
            f"{tree.median * 100:.0f} % (median held-out error; p90 {tree.p90 * 100:.0f} %; "
            f"{tree.lean()}; {tree.rows} published rows") in r.output
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "dgx-h100",
                                 "--nodes", "4", "-b", "1M", "-e", "1G", "-f", "1024",
                                 "--json"])
    rows = [json.loads(x) for x in r.output.splitlines()]
    fab = build_cluster("dgx-h100", 4)
    assert [x["choice_group"] for x in rows] == [
        choice_group(fab, "all_reduce", x["size_bytes"], x["algorithm"], x["protocol"])
        for x in rows]
    assert rows[0]["choice_group"] == "several servers, bandwidth, tree/LL128"
    assert all(0 < x["choice_band"] < 5 for x in rows)


# The issue-34 targets, held out: those not met yet are expected to fail until the model
# meets them; those met are kept.
TARGETS = [("several servers, bandwidth", "median", 0.07),
           ("several servers, bandwidth", "p90", 0.20),
           ("InfiniBand, bandwidth", "median", 0.10),
           ("NVLink racks, bandwidth", "median", 0.10),
           # 11.5 % once Azure's pages vendored twice count as fitted (10.0 % with them)
           ("one server, 1-16 MiB", "median", 0.10)]
TARGETS_MET = [("RoCE, bandwidth", "median", 0.10),
               # 10.8 -> 8.4 % once p4d's first EFA carried the share of its line rate it
               # is measured to sustain (NicSpec.sustained_share, reference row 240)
               ("EFA, bandwidth", "median", 0.10),
               # 15.0 % once steps between a rack's hosts got their cost (17.3 % before),
               # 15.4 % with six more sources (2026-12-01: EFA runs whose small messages
               # the model timed short), 11.7-11.8 % once crossings over EFA paid a share
               # of the plugin's declared latency; 15.5 % with ABCI's A100 runs
               # (2026-12-02: NCCL 2.8.4), 15.0 % once broadcasts overlap back to back, 15.1 %
               # with Azure ML's ND96asr_v4 (2026-12-03), 14.4 % once a ring inside one
               # NVLink domain ran on NCCL's active channels and LL's Hopper step was fitted
               ("all scopes, latency", "median", 0.15)]


@pytest.mark.parametrize(("group", "stat", "target"), TARGETS)
@pytest.mark.xfail(strict=True, reason="issue 34: held-out error above target")
def test_heldout_error_meets_the_target(group: str, stat: str, target: float) -> None:
    assert heldout()["groups"][group][stat] <= target


def test_alltoalls_across_servers_pay_the_proxys_posts_not_a_step_per_peer() -> None:
    """A network step per remote peer made AWS p5's all-to-alls at 128-256 GPUs up to 78 %
    slow (EFA's all-to-alls 12.5 %, p90 52 %, held out); the proxy's posts per peer's part
    (2026-12-04) take them to 6.7 %, p90 12 %: kept there."""
    groups = heldout()["groups"]
    assert groups["EFA, all-to-all"]["median"] <= 0.08
    assert groups["EFA, all-to-all"]["p90"] <= 0.20
    assert groups["several servers, all-to-all"]["median"] <= 0.09


def test_one_server_bandwidth_holds_its_median() -> None:
    """The one group inside its target today (issue 34: 10 %): kept there."""
    assert heldout()["groups"]["one server, bandwidth"]["median"] <= 0.10


@pytest.mark.parametrize(("group", "stat", "target"), TARGETS_MET)
def test_heldout_error_meets_the_target_where_it_was_met(group: str, stat: str,
                                                         target: float) -> None:
    """RoCE met its target once 45 more sources were vendored (11.1 -> 9.9 %), EFA once
    p4d's EFA carried the share of its line rate it is measured at (10.8 -> 8.4 %): kept there.
    Small-message time, met at 14.7 % before, went to 17 % with them, back to 15.0 % once
    steps between a rack's hosts got their cost, to 15.4 % with six more sources whose
    EFA runs' small messages the model timed short, and to 11.8 % once a crossing over
    EFA paid a share of the plugin's declared latency (2026-12-01): kept there."""
    assert heldout()["groups"][group][stat] <= target


def test_local_rows_hold_the_same_rows_as_the_scope_groups(
        computed: tuple[ModuleType, dict[str, Any]]) -> None:
    _, table = computed
    per_kind: dict[str, int] = {}
    for key, g in table["local"].items():
        kind = key.rsplit("|", 1)[1]
        per_kind[kind] = per_kind.get(kind, 0) + g["rows"]
        assert g["low"] <= g["signed_median"] <= g["high"]
        assert g["min_bytes"] <= g["max_bytes"]
    assert per_kind == {k: table["groups"][f"all scopes, {k}"]["rows"] for k in per_kind}


def test_the_nearest_rows_are_of_the_system_scale_kind_and_sizes_asked() -> None:
    local = heldout()["local"]
    racks = build_cluster("gb200-nvl72", 20)
    loc = local_evidence(racks, "all_reduce", 2**34)
    assert loc is not None and (loc.system, loc.servers, loc.kind) == \
        ("gb200-nvl72", 20, "bandwidth")
    assert loc.rows == local[local_key("gb200-nvl72", 20, "bandwidth")]["rows"]
    # 16 racks are near 20 (within 2x), 64 are not; 1 KiB is another kind (latency), and
    # no latency row was published there; 1 MiB is far below the 512 MiB-16 GiB measured
    near = local_evidence(build_cluster("gb200-nvl72", 16), "all_reduce", 2**34)
    assert near is not None and near.servers == 20
    assert local_evidence(build_cluster("gb200-nvl72", 64), "all_reduce", 2**34) is None
    assert local_evidence(racks, "all_reduce", 1024) is None
    assert local_evidence(racks, "all_reduce", 2**20) is None
    assert local_evidence(build_cluster("pcie-8gpu", 2), "all_reduce", 2**30) is None
    # rows of the question's band of sizes where there are enough of them: two DGX H100
    # at 8 MiB are judged by the 4-8 MiB rows, not by every size's
    two = build_cluster("dgx-h100", 2)
    sized = local_evidence(two, "all_reduce", 8 * 2**20)
    key = local_key("dgx-h100", 2, "bandwidth", size_band_of(8 * 2**20))
    assert sized is not None and sized.sized and sized.rows == \
        heldout()["local_sizes"][key]["rows"]
    assert 4 * 2**20 <= sized.min_bytes <= sized.max_bytes < 16 * 2**20
    # the 20 racks' rows span 512 MiB-16 GiB: no band of sizes holds 3 of them, so all count
    assert loc.sized is False and loc.min_bytes == 2**29


def test_the_nearest_rows_warn_only_where_they_lean_beyond_the_band() -> None:
    a100 = build_cluster("dgx-a100", 16)
    loc = local_evidence(a100, "all_reduce", 2**30)
    assert loc is not None and loc.signed_median > 1.0  # CoreWeave's 16 A100, model fast
    why = local_warning(a100, "all_reduce", 2**30)
    assert why is not None and "dgx-a100 at 16 servers" in why
    assert f"median {loc.signed_median * 100:+.0f} %" in why
    assert f"± {band(a100, 'all_reduce', 2**30).median * 100:.0f} %" in why  # its band
    # 20 GB200 racks: 2x fast while their rows ran NVLSTree in the model; the run had NVLS
    # off (corrected 2026-12-03), and with trees the rows lean no further than the band
    racks = build_cluster("gb200-nvl72", 20)
    near = local_evidence(racks, "all_reduce", 2**34)
    assert near is not None and abs(near.signed_median) < 0.25
    assert local_warning(racks, "all_reduce", 2**34) is None
    # two DGX H100 at 1 GiB: the nearest rows agree with the band, nothing to say
    two = build_cluster("dgx-h100", 2)
    assert local_evidence(two, "all_reduce", 2**30) is not None
    assert local_warning(two, "all_reduce", 2**30) is None
    # one GB300 rack at 512 KiB: its rows are times (latency), 35 % fast in median until
    # steps between the rack's trays got their cost; within the band since
    rack = build_cluster("gb300-nvl72", 1)
    near = local_evidence(rack, "all_reduce", 2**19)
    assert near is not None and near.kind == "latency"
    assert local_warning(rack, "all_reduce", 2**19) is None
    # 64 HGX B200 at 1-2 MiB: over every size their rows lean too, at 4-8 GiB they do not,
    # at 1-2 MiB (the model fast by 46 % in median, one source) they do, and it says so
    b200 = build_cluster("hgx-b200", 64)
    assert local_warning(b200, "all_reduce", 2**32) is None
    mid = local_warning(b200, "all_reduce", 2**20)
    assert mid is not None and "hgx-b200 at 64 servers, 1 MiB to 2 MiB" in mid
    assert "1 source" in mid and "median +46 %" in mid


def test_bench_says_where_the_nearest_rows_disagree() -> None:
    args = ["bench", "all_reduce", "--system", "dgx-a100", "--nodes", "16", "-b", "1G",
            "-e", "1G"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "# warning: published runs of dgx-a100 at 16 servers" in r.output
    r = CliRunner().invoke(app, [*args, "--json"])
    row = json.loads(r.stdout.splitlines()[0])  # the rows; run warnings go to stderr
    assert row["local"].startswith("published runs of dgx-a100 at 16 servers")
    # per size: bench's 1 MiB row says it, its 4 GiB row does not
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "hgx-b200", "--nodes",
                                 "64", "-b", "1M", "-e", "4G", "-f", "4096", "--json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.output.splitlines() if x.startswith("{")]
    assert [x["size_bytes"] for x in rows] == [2**20, 2**32]
    assert "1 MiB to 2 MiB" in rows[0]["local"] and rows[1]["local"] == ""
    # one warning per band of sizes that leans, in the order of the sizes (16-32 MiB did
    # not while ABCI's runs widened InfiniBand's band from 12 to 15 %; it is 12 % again
    # since NVLSTree's fill lost its scatter and gather stages)
    r = CliRunner().invoke(app, ["bench", "all_reduce", "--system", "hgx-b200", "--nodes",
                                 "64", "-b", "1M", "-e", "256M", "-f", "4"])
    assert r.exit_code == 0, r.output
    warned = [x for x in r.output.splitlines() if x.startswith("# warning: published")]
    assert [w.split(", ")[1].split(" (")[0] for w in warned] == \
        ["1 MiB to 2 MiB", "4 MiB to 8 MiB", "16 MiB to 32 MiB", "64 MiB to 128 MiB",
         "256 MiB to 512 MiB"]


# --------------------------------------------------------------------------------------
# benchmarks/source_agreement.py: how far published runs of one configuration are apart

def test_source_agreement_scores_each_source_by_the_others() -> None:
    sa = load("source_agreement")
    # a source's own value is the median of its rows; the others' median predicts it
    assert sa.agreement_errors([("a", 100.0), ("b", 80.0), ("b", 90.0)]) == \
        {"a": -0.15, "b": 0.1765}
    assert sa.agreement_errors([("a", 1.0), ("a", 2.0)]) == {}  # one source: nothing
    three = sa.agreement_errors([("a", 100.0), ("b", 110.0), ("c", 200.0)])
    assert three == {"a": 0.55, "b": 0.3636, "c": -0.475}
    assert [sa.band_of(x) for x in (1024, 2**20, 16 * 2**20, 32 * 2**20, 2**30)] == \
        ["< 1 MiB", "1-16 MiB", "1-16 MiB", "32-256 MiB", "> 256 MiB"]


def test_source_agreement_keeps_configurations_apart(fitted: Fitted) -> None:
    b = fitted[0]
    sa = load("source_agreement")
    base = b.Case(row=1, system="dgx-h100", nodes=2, nbytes=2**30, measured_busbw=300.0,
                  source="x")
    key = sa.config_key(base)
    assert sa.config_key(b.Case(row=2, system="dgx-h100", nodes=2, nbytes=2**30,
                                measured_busbw=350.0, source="y")) == key
    for other in ({"env": (("NCCL_NVLS_ENABLE", "0"),)}, {"algo": "ring"}, {"nodes": 4},
                  {"gpus_per_thread": 8}, {"measured_time_us": 20.0},
                  {"cluster": {"fabric": "roce-400g"}}):
        kw = {"row": 3, "system": "dgx-h100", "nodes": 2, "nbytes": 2**30,
              "measured_busbw": 300.0, "source": "y", **other}
        assert sa.config_key(b.Case(**kw)) != key, other


def test_source_agreement_on_the_published_rows(fitted: Fitted) -> None:
    _, cs, errors, _ = fitted
    sa = load("source_agreement")
    model = sa.held_out(cs, errors)
    groups, configs = sa.agreement(cs, model)
    by = {g["group"]: g for g in groups}
    assert configs and all(len(c["sources"]) >= 2 for c in configs)
    # a page vendored twice is one source: its copies do not vote for each other
    copies = set(sa.acc.SAME_DOCUMENT)
    assert not any(copies & set(c["sources"]) for c in configs)
    # large messages: independent runs of one configuration agree within a few percent
    for g in ("one server, > 256 MiB", "several servers, > 256 MiB"):
        assert by[g]["sources_disagree"]["median"] < 0.03, by[g]
    # mid sizes across servers: they agree several times less (2 x DGX H100 at 1-16 MiB:
    # 8-30 % apart; 7 % in median over 27 configurations since GCP's two A4 runs, which
    # agree with each other, 2026-12-03)
    mid = by["several servers, 1-16 MiB"]["sources_disagree"]["median"]
    assert mid > 0.05 and mid > 3 * by["several servers, > 256 MiB"]["sources_disagree"]["median"]


@pytest.mark.xfail(strict=True, reason="issue 34: at 32-256 MiB on two DGX H100 the two "
                   "sources agree within 3 % and the model (NVLSTree) is 7 % off")
def test_model_as_close_as_the_sources_are_across_servers_32_to_256_mib(
        fitted: Fitted) -> None:
    _, cs, errors, _ = fitted
    sa = load("source_agreement")
    model = sa.held_out(cs, errors)
    g = {x["group"]: x for x in sa.agreement(cs, model)[0]}["several servers, 32-256 MiB"]
    assert g["model_held_out"]["median"] <= g["sources_disagree"]["median"] + 0.02, g


def test_one_server_is_not_warned_by_rows_across_servers() -> None:
    """The published rows of quad-GH200 are all across two nodes: they say nothing of
    one node, whose traffic never reaches the NICs."""
    from fabricsim.collectives.accuracy import local_warning

    two, one = build_cluster("quad-gh200", 2), build_cluster("quad-gh200", 1)
    assert local_warning(two, "all_reduce", 8) is not None   # 30 us modelled, 18 measured
    assert local_warning(one, "all_reduce", 8) is None

