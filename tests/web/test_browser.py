"""The page in a real Chromium (Debian's ``chromium``, driven by Playwright): load it,
change a design, run it, see the chart re-render, and see a YAML error beside its line.

Skipped when no Chromium is installed, unless ``FABRICSIM_REQUIRE_BROWSER=1`` (CI sets
it: ``.ci/run`` installs the browser when it is missing)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("FABRICSIM_REQUIRE_BROWSER") != "1":
    pytest.skip("no chromium on this machine (apt-get install chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

#: Flags for a headless browser on a machine without outside network access.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture()
def page(served: str) -> Iterator[Any]:
    assert CHROMIUM is not None, "FABRICSIM_REQUIRE_BROWSER=1 but chromium is not installed"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        # generous waits: on a loaded machine a worker's start and a validation of the
        # 256-GPU reference design take seconds (nothing here is a speed test)
        pg.set_default_timeout(120_000)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(served + "/")
        pg.wait_for_selector("body[data-ready='1']")
        yield pg
        browser.close()
        assert errors == [], errors


def _yaml(pg: Any) -> str:
    return str(pg.input_value("#design-0 .yaml"))


def _traces(pg: Any, fig: str) -> list[str]:
    return list(pg.evaluate(f"() => document.getElementById('fig-{fig}').data"
                            ".map(t => t.name)"))


def test_change_a_design_run_it_and_the_chart_rerenders(page: Any) -> None:
    pg = page
    assert "name: train-llama3-70b-256" in _yaml(pg)  # the reference design to start
    pg.select_option("#kind", "bench")
    pg.fill("#design-0 [data-field='cluster.nodes']", "2")
    pg.dispatch_event("#design-0 [data-field='cluster.nodes']", "change")
    pg.wait_for_function("() => document.querySelector('#design-0 .yaml').value"
                         ".includes('nodes: 2')")
    status = pg.wait_for_selector("#design-0 .status.ok")  # the newest check's answer
    assert status.inner_text().startswith("16 GPUs on 2 × dgx-h100")
    pg.click("#run")
    pg.wait_for_selector("#fig-busbw[data-rendered='1'] .main-svg")
    first = _traces(pg, "busbw")
    assert "ib-ndr tuner" in first and len(first) > 3
    assert pg.get_attribute("#fig-busbw", "data-rendered") == "1"
    job1 = pg.get_attribute("#fig-busbw", "data-job")
    assert f"job={job1}" in pg.url  # a shareable address per result

    pg.select_option("#design-0 [data-field='cluster.fabric']", "roce-400g")
    pg.wait_for_function("() => document.querySelector('#design-0 .yaml').value"
                         ".includes('fabric: roce-400g')")
    pg.click("#run")
    pg.wait_for_function(f"() => document.getElementById('fig-busbw').dataset.job !== "
                         f"'{job1}'")
    assert pg.get_attribute("#fig-busbw", "data-rendered") == "2"  # the same chart redrawn
    assert "roce-400g tuner" in _traces(pg, "busbw")
    assert pg.locator("#fig-busbw .main-svg .scatterlayer .trace").count() == len(first)
    summary = pg.inner_text("#summary")
    assert "roce-400g" in summary
    # the held-out band of the largest size, by group and by NCCL's choice
    assert "± " in summary.split("held-out error there (its group)")[1].split("\n")[0]
    assert "signed median" in summary.split("held-out error of that choice")[1]

    # the shareable address opens the same result
    pg.goto(pg.url.split("?")[0] + f"?job={job1}")
    pg.wait_for_selector("#fig-busbw[data-rendered='1'] .main-svg")
    assert "ib-ndr tuner" in _traces(pg, "busbw")


def test_bad_yaml_shows_the_error_next_to_its_line(page: Any) -> None:
    pg = page
    pg.fill("#design-0 .yaml", "cluster:\n  system: dgx-h100\n  nodes: 2\ntraining:\n"
                               "  model: llama3-8b\n  tp: many\n")
    box = pg.wait_for_selector("#design-0 .yaml-error[data-line='6']", state="visible")
    assert "training.tp" in box.inner_text()
    assert pg.inner_text("#design-0 .gutter span.bad") == "6"
    # the box sits beside line 6 of the editor
    line_top = pg.evaluate("() => document.querySelector(\"#design-0 .gutter "
                           "span[data-line='6']\").getBoundingClientRect().top")
    box_top = pg.evaluate("() => document.querySelector('#design-0 .yaml-error')"
                          ".getBoundingClientRect().top")
    assert abs(line_top - box_top) < 12
    pg.fill("#design-0 .yaml", "cluster:\n  nodes: [2\n")  # malformed YAML
    pg.wait_for_selector("#design-0 .yaml-error[data-line='3']", state="visible")
    pg.fill("#design-0 .yaml", "cluster:\n  nodes: 2\n")
    pg.wait_for_selector("#design-0 .yaml-error", state="hidden")
    assert pg.locator("#design-0 .gutter span.bad").count() == 0


def test_an_infer_job_shows_latency_and_throughput(page: Any) -> None:
    """The serving job from the page: the inference: section run, its summary rows and
    its two charts."""
    pg = page
    pg.select_option("#kind", "infer")
    pg.fill("#design-0 .yaml", "cluster:\n  system: dgx-h100\n  nodes: 2\ninference:\n"
                               "  model: llama3-8b\n  tp: 1\n  batch: 8\n"
                               "  tpot_target_ms: 20\n  prefill_tp: 1\n")
    status = pg.wait_for_selector("#design-0 .status.ok")
    assert "inference llama3-8b" in status.inner_text()
    pg.click("#run")
    pg.wait_for_selector("#fig-serving_latency[data-rendered='1'] .main-svg")
    names = _traces(pg, "serving_throughput")
    assert names == ["static batch", "continuous batching", "disaggregated"]
    summary = pg.inner_text("#summary")
    assert "time per output token ms" in summary and "continuous: batch" in summary
    assert "–" not in summary.split("disaggregated: TTFT ms")[1].split("\n")[0]
