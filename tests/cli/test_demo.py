import re
from pathlib import Path

import pytest

from fabricsim.cli.app import main


def test_demo_writes_report_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    code = main(["demo", "--out", str(tmp_path), "--section", "cluster"])
    assert code == 0
    report = (tmp_path / "report.md").read_text()
    assert "InfiniBand NDR" in report and "RoCEv2 400G" in report
    assert (tmp_path / "hierarchy.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "report.md" in out and "report.html" in out


def test_demo_unknown_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--section", "clstr"]) == 2
    assert "cluster" in capsys.readouterr().err


def test_demo_training_section_has_its_picture(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--section", "training"]) == 0
    assert (tmp_path / "training.png").stat().st_size > 5000
    assert "![training step breakdown](training.png)" in (tmp_path / "report.md").read_text()


def test_full_demo_shows_every_capability(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The shop window (issue 16): every section with its figures, one self-contained
    HTML page, and the files it wrote listed with their sizes."""
    assert main(["demo", "--out", str(tmp_path), "--quiet"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "report.html"),
                                               str(tmp_path / "report.md")]
    md = (tmp_path / "report.md").read_text()
    heads = re.findall(r"^## (.+)$", md, re.M)
    assert heads == ["1. The cluster", "2. All-reduce on 256 GPUs",
                     "3. MoE expert parallelism on 256 GPUs", "4. A training step",
                     "5. Growing the job to 16,384 GPUs",
                     "6. Which fabric is worth its price", "7. Serving Llama 3 70B",
                     "8. A fault, its bottleneck and its cost",
                     "9. Two jobs on one cluster, and a server that fails",
                     "10. A day of jobs on the design",
                     "11. A PFC pause storm and the watchdog", "Files written"]
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(figures) >= 15 and all((tmp_path / f).stat().st_size > 5000 for f in figures)
    for f in figures:  # the files table names every figure
        assert f"| `{f}` |" in md
    page = (tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == len(figures)
    assert "http://" not in page and "https://" not in page  # nothing fetched at view time
    for h in heads:
        assert h in page
    # the fault section names the degraded link and the cost; the packet section the
    # watchdog; the plan section the three fabrics
    assert "server0/nic0->leaf0.0" in md and "idle GPUs" in md
    assert "no-watchdog" in md and "tripped" in md
    assert all(f in md for f in ("| ib-ndr |", "| roce-400g |", "| efa |"))


def test_demo_time_limit_is_explained(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path), "--time-limit", "1e-6"]) == 2
    err = capsys.readouterr().err
    assert "--time-limit" in err and "stopped before: cluster" in err
    assert main(["demo", "--out", str(tmp_path), "--time-limit", "-1"]) == 2


def test_demo_scaling_and_serving_sections(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The strong-scaling section names what grows and what failures cost at every size;
    the serving section shows the latency/throughput frontier and the KV cache crossing
    each fabric."""
    assert main(["demo", "--out", str(tmp_path), "--section", "scaling",
                 "--section", "serving"]) == 0
    md = (tmp_path / "report.md").read_text()
    scale = md.split("## 1.")[1].split("## 2.")[0]
    rows = [line for line in scale.splitlines() if re.match(r"^\| [\d,]+ \|", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["256", "1,024", "4,096", "16,384"]
    goodput = [float(r.split("|")[6].strip(" %")) for r in rows]
    assert goodput == sorted(goodput, reverse=True) and goodput[-1] < goodput[0] < 100
    eff = [float(r.split("|")[3].strip(" %")) for r in rows]
    assert eff[0] == 100.0 and eff[-1] < eff[0]  # a fixed batch over more GPUs loses
    assert "bubble" in rows[-1] and "dp" in rows[-1]
    serve = md.split("## 2.")[1]
    assert "| InfiniBand NDR | 640 MiB |" in serve and "| RoCEv2 400G | 640 MiB |" in serve
    tpot = [float(line.split("|")[4]) for line in serve.splitlines()
            if re.match(r"^\| \d+ ms \|", line)]
    assert len(tpot) == 7 and tpot == sorted(tpot)
    for png in ("scaling.png", "serving.png"):
        assert (tmp_path / png).stat().st_size > 5000


def test_demo_moe_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3's layer on both fabrics: DeepEP's hierarchical kernels beat NCCL's
    all-to-all across servers; inside one server every kernel rides NVLink."""
    assert main(["demo", "--out", str(tmp_path), "--section", "moe"]) == 0
    md = (tmp_path / "report.md").read_text()
    rows = [line.split("|") for line in md.splitlines()
            if re.match(r"^\| (InfiniBand NDR|RoCEv2 400G) \| \d+ \|", line)]
    assert len(rows) == 18
    t = {(r[1].strip(), int(r[2]), r[3].strip()): float(r[4].replace(",", ""))
         for r in rows}
    for fab in ("InfiniBand NDR", "RoCEv2 400G"):
        assert t[(fab, 256, "deepep")] < 0.5 * t[(fab, 256, "nccl")]
    assert all(r[6].strip() == "nvlink" for r in rows if int(r[2]) == 8)
    for png in ("moe_infiniband-ndr.png", "moe_rocev2-400g.png"):
        assert (tmp_path / png).stat().st_size > 5000


def test_demo_day_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A synthetic day replayed on both designs by both schedulers, through the cluster
    job: one row each, and the queue, not the network, what it costs here."""
    assert main(["demo", "--out", str(tmp_path), "--section", "day", "--quiet"]) == 0
    capsys.readouterr()
    md = (tmp_path / "report.md").read_text()
    assert "A day of jobs on the design" in md and "synthetic day" in md
    rows = [ln for ln in md.splitlines() if ln.startswith(("| InfiniBand", "| RoCE"))]
    assert len(rows) == 4 and {r.split("|")[2].strip() for r in rows} == {"fifo",
                                                                            "topology"}
    assert "no job's traffic meets another's" in md


def test_demo_shared_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two jobs sharing the design and a server failing under the larger: slowdowns on
    both fabrics, and the GPU-hours lost three ways, a spare the cheapest."""
    assert main(["demo", "--out", str(tmp_path), "--section", "shared", "--quiet"]) == 0
    md = (tmp_path / "report.md").read_text()
    assert "Two jobs on one cluster" in md and "llama3-8b-sft" in md
    row = next(line for line in md.splitlines()
               if line.startswith("| InfiniBand NDR | llama3-70b |") and "×" not in line)
    spare, wait, shrink = (float(c.strip().replace(",", "")) for c in row.split("|")[3:6])
    assert 0 < spare < shrink < wait
