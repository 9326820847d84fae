"""The demo report: the seeds' 256-GPU reference design, InfiniBand NDR vs RoCEv2.

32 DGX H100 servers (256 GPUs), rail-optimized and non-blocking, on the two fabrics the
seeds weigh against each other. :func:`write_demo` writes ``report.md``, the
self-contained ``report.html`` (figures embedded) and the PNGs to a folder; every number
in it is computed by fabricsim when the report is written. Sections: the cluster, the
all-reduce curve, a training step, the job grown to 16,384 GPUs (strong scaling and
goodput), the fabrics compared on cost, serving (continuous batching, disaggregated
prefill/decode), a degraded link with the bottleneck it creates and its cost, two jobs
sharing the cluster with a server failing under one, and a packet-level PFC pause storm
with and without the watchdog.

Example
-------
>>> import tempfile
>>> out = write_demo(tempfile.mkdtemp(), sections=("cluster",))
>>> out.name, out.with_suffix(".html").exists()
('report.md', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricsim import jobs
from fabricsim.fabric import Fabric
from fabricsim.reports.document import Doc
from fabricsim.scenario import FaultSpec, Scenario
from fabricsim.scenario.sections import ServingSection, TrainingSection

#: The two designs compared, as (label, fabric preset).
DESIGNS = (("InfiniBand NDR", "ib-ndr"), ("RoCEv2 400G", "roce-400g"))
SYSTEM = "dgx-h100"
NODES = 32


@dataclass
class DemoContext(Doc):
    """What the sections share: the report being written, and per design (label) its
    scenario — the shipped training scenario on that fabric — and its fabric, built."""

    designs: dict[str, Scenario] = field(default_factory=dict)
    fabrics: dict[str, Fabric] = field(default_factory=dict)


def section_cluster(ctx: DemoContext) -> None:
    """Section 1: what the cluster is, on each fabric."""
    from fabricsim.reports.scenario import section_cluster as cluster

    cluster(ctx, ctx.fabrics)


#: Sizes of the all-reduce sweep (bytes): 1 KiB to 8 GiB, factor 2.
SWEEP = tuple(2**k for k in range(10, 34))
#: The training step shown: Llama 3 70B, TP8 × PP4 (interleaved) × DP8, ZeRO-1.
TRAINING_SCENARIO = "train-llama3-70b-256.yaml"
#: The fault: one NIC link of server 0 comes up at a quarter of its speed (e.g. a 400G
#: port that trained down to 100G), both directions.
FAULT_LINK = "server0/nic0<->leaf0.0"
FAULT_FACTOR = 0.25
#: The packet-level section's scenario (shipped).
PAUSE_SCENARIO = "packet-pause-storm"


def _size(n: int) -> str:
    from fabricsim.units import format_bytes

    return format_bytes(n)


def _ms(s: float) -> str:
    return f"{s * 1e3:,.2f} ms"


def section_allreduce(ctx: DemoContext) -> None:
    """Section 2: all-reduce bus bandwidth and time against size, with the algorithm and
    protocol NCCL would pick at each size."""
    from fabricsim.plots.busbw import Sweep, choice_spans, plot_collective

    ctx.step("all-reduce sweep")
    curves = {}
    for label, sc in ctx.designs.items():
        job = jobs.job_from_scenario("bench", sc, collective="all_reduce", sizes=SWEEP)
        got = jobs.run(job, ctx.fabrics[label]).rows[None]
        curves[label] = Sweep(sizes=[r.size_bytes for r in got],
                              busbw_gbps=[r.busbw_gbps for r in got],
                              time_s=[r.time_us * 1e-6 for r in got],
                              choice=[f"{r.algorithm}/{r.protocol}".lower() for r in got])
    ctx.heading("All-reduce on 256 GPUs")
    ctx.add("nccl-tests conventions (busbw = algbw × 2(n−1)/n); the algorithm and protocol "
            "are chosen by least predicted time, as NCCL's tuner does. Run the same with "
            "`fabricsim bench all_reduce --system dgx-h100 --nodes 32 --fabric ib-ndr`.", "")
    shown = (2**20, 2**26, 2**30, 2**33)
    rows: list[list[object]] = []
    for label, sw in curves.items():
        for size in shown:
            k = list(sw.sizes).index(size)
            rows.append([label, _size(size), f"{sw.time_s[k] * 1e6:,.1f}",
                         f"{sw.busbw_gbps[k]:,.1f}", sw.choice[k]])
    ctx.table(["fabric", "size", "time (µs)", "busbw (GB/s)", "algorithm/protocol"], rows)
    switches = {label: ", ".join(f"{c} from {_size(int(a))}"
                                 for a, _b, c in choice_spans(sw.sizes, sw.choice))
                for label, sw in curves.items()}
    ctx.add("Choices over the sweep: " + "; ".join(f"{k}: {v}" for k, v in switches.items())
            + ".", "")
    ctx.figure(plot_collective(curves, ctx.out / "allreduce.png",
                               title="all_reduce, 32 × DGX H100 (256 GPUs)"),
               "all-reduce bus bandwidth and time against size")


#: The MoE section: DeepSeek-V3's layer (4,096 tokens per rank, FP8 dispatch, BF16
#: combine, node-limited to 4 servers) at these EP sizes, with these kernel families.
MOE_EP = (8, 16, 32, 64, 128, 256)
MOE_KERNELS = ("deepep", "deepep-ll", "nccl")


def section_moe(ctx: DemoContext) -> None:
    """Section 3: MoE expert dispatch and combine on each fabric, per kernel family."""
    from fabricsim.collectives.ep import ep_heldout
    from fabricsim.plots.ep import plot_ep

    ctx.step("MoE dispatch/combine")
    rows_by: dict[str, list[dict[str, Any]]] = {}
    for label, sc in ctx.designs.items():
        job = jobs.job_from_scenario("ep", sc, ep_sizes=MOE_EP, kernels=MOE_KERNELS,
                                     node_limit=4)
        rows_by[label] = jobs.run(job, ctx.fabrics[label]).rows
    ctx.heading("MoE expert parallelism on 256 GPUs")
    fams = ep_heldout()["families"]
    held = ", ".join(f"{name} ± {fams[k]['median'] * 100:.0f} %"
                     for k, name in (("deepep", "DeepEP normal"),
                                     ("deepep-ll", "low-latency")) if k in fams)
    ctx.add("DeepSeek-V3's MoE layer (4,096 tokens per rank, top-8 of 256 experts, FP8 "
            "dispatch, BF16 combine, node-limited routing) moved by DeepEP's normal and "
            "low-latency kernels and by NCCL's all-to-all, each as its published design "
            f"(docs/ep.md; median held-out error on published figures: {held}). Run the "
            "same with `fabricsim bench ep --system dgx-h100 --nodes 32 --ep 8,64,256 "
            "--node-limit 4`.", "")
    table: list[list[object]] = []
    for label, rows in rows_by.items():
        for r in rows:
            if r["ep"] in (8, 64, 256) and r["phase"] == "dispatch":
                table.append([label, r["ep"], r["kernel"], f"{r['time_us']:,.0f}",
                              f"{r['headline_gbps']:,.1f} ({r['headline']})", r["limit"]])
    ctx.table(["fabric", "EP", "kernel", "dispatch (µs)", "GB/s (convention)", "limit"],
              table)
    for label, rows in rows_by.items():
        slug = "".join(ch if ch.isalnum() else "-" for ch in label.lower()).strip("-")
        ctx.figure(plot_ep(rows, ctx.out / f"moe_{slug}.png",
                           title=f"DeepSeek-V3 dispatch/combine, {label}"),
                   f"MoE dispatch and combine against EP size on {label}")


def design_scenario(fabric: str) -> Scenario:
    """The shipped training scenario (:data:`TRAINING_SCENARIO`) on ``fabric``."""
    from fabricsim.scenario import load_scenario

    sc = load_scenario(TRAINING_SCENARIO.removesuffix(".yaml"))
    return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={
        "system": SYSTEM, "nodes": NODES, "fabric": fabric, "topology": "rail-optimized"})})


def _price(sc: Scenario) -> float:
    return float(sc.gpu_hour_usd or 0.0) or 2.5


def section_training(ctx: DemoContext) -> None:
    """Section 3: one training step of Llama 3 70B on each fabric."""
    from fabricsim.plots.training import comm_by_network, plot_step_breakdown
    from fabricsim.reports.scenario import training_parts

    ctx.step("training step")
    rows: list[list[object]] = []
    parts = {}
    nvlink: set[str] = set()
    steps = {}
    cfg = price = None
    for label, fab in ctx.fabrics.items():
        job = jobs.job_from_scenario("train", ctx.designs[label])
        cfg, price = job.parallel, _price(ctx.designs[label])
        r = jobs.run(job, fab).step
        steps[label] = r.step_time_s
        parts[label], nvlink = training_parts(fab, r)
        split = comm_by_network(parts[label], nvlink)
        rows.append([label, f"{r.step_time_s:.3f}", f"{r.tokens_per_s:,.0f}",
                     f"{r.mfu * 100:.1f} %", f"{r.breakdown['compute'] * 1e3:,.0f}",
                     f"{r.breakdown['bubble'] * 1e3:,.0f}", f"{split['NVLink'] * 1e3:,.0f}",
                     f"{split['scale-out'] * 1e3:,.1f}", f"{r.idle_gpus:.1f}",
                     f"${r.comm_usd_per_day:,.0f}"])
    assert cfg is not None
    p = cfg.model_dump()
    ctx.heading("A training step")
    ctx.add(f"Llama 3 70B, TP {p.get('tp')} × PP {p.get('pp')} (interleaved "
            f"{p.get('vp')}) × DP, ZeRO-{p.get('zero')}, sequence {p.get('seq_len')}, "
            f"global batch {p.get('global_batch')}, at ${price:g}/GPU-hour "
            f"(`fabricsim train {TRAINING_SCENARIO}`).", "")
    ctx.table(["fabric", "step (s)", "tokens/s", "MFU", "compute (ms)", "bubble (ms)",
               "exposed comm on NVLink (ms)", "exposed comm on scale-out (ms)",
               "idle GPU equiv.", "lost to comm per day"], rows)
    ctx.figure(plot_step_breakdown(parts, ctx.out / "training.png", nvlink=nvlink,
                                   title="Llama 3 70B step: where the time goes"),
               "training step breakdown")
    (la, sa), (lb, sb) = list(steps.items())[:2]
    net = {k: comm_by_network(v, nvlink)["scale-out"] for k, v in parts.items()}
    ctx.add("Tensor-parallel traffic stays inside the NVLink domain and is the same on both "
            "fabrics; what the fabric changes is the exposed communication over the "
            f"scale-out network (pipeline and data parallel): {net[la] * 1e3:,.1f} ms on {la} "
            f"and {net[lb] * 1e3:,.1f} ms on {lb} per step. The steps differ by "
            f"{abs(sa - sb) * 1e3:.1f} ms ({abs(sa / sb - 1) * 100:.3f} %).", "")


def section_plan(ctx: DemoContext) -> None:
    """Section 5: the fabrics compared on throughput, capex and cost per token."""
    from fabricsim.plots.plan import plot_plan

    ctx.step("fabrics compared")
    names = [name for _label, name in DESIGNS] + ["efa"]
    sc = next(iter(ctx.designs.values()))
    price = _price(sc)
    rows = jobs.run(jobs.job_from_scenario("plan", sc, fabrics=tuple(names))).rows()
    ctx.heading("Which fabric is worth its price")
    ctx.add(f"The same job on each fabric preset, fabric capex (switches, cables, optics, "
            f"NICs) amortised over 4 years, GPUs at ${price:g}/hour "
            f"(`fabricsim plan {TRAINING_SCENARIO} --fabrics {','.join(names)}`).", "")
    ctx.table(["fabric", "tokens/s per GPU", "MFU", "fabric capex", "capex per GPU",
               "USD per 1T tokens", "fabric share of it"],
              [[d["fabric"], f"{d['tokens_per_s_per_gpu']:,.1f}", f"{d['mfu']:.2%}",
                f"${d['capex_usd'] / 1e6:,.2f}M", f"${d['capex_per_gpu_usd']:,.0f}",
                f"${d['usd_per_1t_tokens']:,.0f}", f"{d['fabric_share']:.1%}"]
               for d in rows])
    cheap = min(rows, key=lambda d: d["usd_per_1t_tokens"])
    dear = max(rows, key=lambda d: d["usd_per_1t_tokens"])
    ctx.figure(plot_plan(rows, ctx.out / "fabrics.png",
                         title="Llama 3 70B on 256 × H100: fabrics compared"),
               "fabric comparison with cost")
    ctx.add(f"At equal speed the cost of a token follows the capex: {cheap['fabric']} trains "
            f"1T tokens for ${dear['usd_per_1t_tokens'] - cheap['usd_per_1t_tokens']:,.0f} "
            f"less than {dear['fabric']}.", "")


#: Sizes of the scaling section (GPUs), and the global batch it keeps at every size:
#: 2,048 sequences of 8,192 tokens, Llama 3's 16M-token pre-training batch.
SCALE_GPUS = (256, 1024, 4096, 16384)
SCALE_BATCH = 2048


def section_scaling(ctx: DemoContext) -> None:
    """Section 4: the training job grown to 16,384 GPUs at a fixed global batch (strong
    scaling), with the loss that grows named, and its goodput once failures, checkpoints
    and restarts are counted."""
    from fabricsim.plots.scaling import plot_scaling

    ctx.step("scaling")
    batch = TrainingSection.model_validate({"global_batch": SCALE_BATCH})
    curves = {label: jobs.run(jobs.job_from_scenario(
        "scale", sc, over=batch, gpus=SCALE_GPUS, strong=True)).points
        for label, sc in ctx.designs.items()}
    (la, pa), (lb, pb) = list(curves.items())[:2]
    ctx.heading(f"Growing the job to {SCALE_GPUS[-1]:,} GPUs")
    ctx.add(f"The same Llama 3 70B layout at a fixed global batch of {SCALE_BATCH:,} "
            f"sequences (16M tokens, as Llama 3 was pre-trained) on {la}: more GPUs mean "
            "fewer micro-batches per replica, so the pipeline bubble and the exposed "
            "data-parallel traffic grow; more parts mean more failures. Goodput is the "
            "share of wall time that trains once failures (rates per GPU, NIC, cable, "
            "switch and host from Llama 3's 54-day run), checkpoints and restarts are "
            f"counted (`fabricsim scale {TRAINING_SCENARIO} --strong --global-batch "
            f"{SCALE_BATCH} --gpus {','.join(str(g) for g in SCALE_GPUS)}`).", "")
    rows: list[list[object]] = []
    for p in pa:
        if not p["feasible"]:
            rows.append([f"{p['gpus']:,}", "—", "—", p["reason"], "—", "—", "—", "—"])
            continue
        losses = ", ".join(f"{k} {v * 100:.1f} %" for k, v in p["losses"].items()
                           if v >= 0.001)
        rows.append([f"{p['gpus']:,}", f"{p['tokens_per_s_per_gpu']:,.0f}",
                     f"{p['scaling_efficiency'] * 100:.1f} %", losses,
                     f"{p['job_mtbf_hours']:,.1f}", f"{p['goodput'] * 100:.1f} %",
                     f"${p['comm_usd_per_day']:,.0f}", f"${p['usd_lost_per_day']:,.0f}"])
    ctx.table(["GPUs", "tokens/s per GPU", "scaling efficiency", "share of the step lost to",
               "job MTBF (h)", "goodput", "$/day lost to communication",
               "$/day lost to failures"], rows)
    ctx.figure(plot_scaling([p for p in pa if p["feasible"]], ctx.out / "scaling.png",
                            title=f"Llama 3 70B, global batch {SCALE_BATCH:,}, on {la}"),
               "strong scaling efficiency and the cost of communication")
    big_a, big_b = pa[-1], pb[-1]
    if big_a["feasible"] and big_b["feasible"]:
        diff = big_b["tokens_per_s_per_gpu"] / big_a["tokens_per_s_per_gpu"] - 1
        ctx.add(f"At {big_a['gpus']:,} GPUs the job fails every "
                f"{big_a['job_mtbf_hours']:.1f} h on average "
                f"({big_a['failures_per_day']:.1f} failures a day) and trains "
                f"{big_a['goodput'] * 100:.1f} % of the time: "
                f"${big_a['usd_lost_per_day']:,.0f} a day of GPU time lost to failures, "
                f"beside ${big_a['comm_usd_per_day']:,.0f} lost to communication (most of "
                f"it tensor-parallel, inside the NVLink domain). On {lb} it trains "
                f"{abs(diff) * 100:.2f} % {'faster' if diff > 0 else 'slower'} at that size: "
                "this job's scale-out traffic is pipeline and data parallel, mostly hidden "
                "behind compute.", "")


#: The served model, request shape and TPOT targets of the serving section.
SERVE_MODEL = "llama3-70b"
SERVE_PROMPT, SERVE_OUTPUT = 4096, 512
SERVE_TPOT_MS = (10, 15, 20, 30, 50, 75, 100)
SERVE_DISAGG_BATCH = 64


def section_serving(ctx: DemoContext) -> None:
    """Section 6: serving Llama 3 70B: the continuous-batching frontier of one 8-GPU
    instance, and a disaggregated prefill/decode pair whose KV caches cross the
    scale-out fabric."""
    from fabricsim.plots.serving import plot_serving_frontier

    ctx.step("serving")
    label = next(iter(ctx.fabrics))

    def serve(lab: str, **fields: Any) -> Any:
        over = ServingSection.model_validate({
            "model": SERVE_MODEL, "tp": 8, "prompt_len": SERVE_PROMPT,
            "output_len": SERVE_OUTPUT, "precision": "fp8", **fields})
        return jobs.run(jobs.job_from_scenario("infer", ctx.designs[lab], over=over),
                        ctx.fabrics[lab]).run

    frontier = [serve(label, tpot_target_ms=ms).continuous for ms in SERVE_TPOT_MS]
    pairs = {lab: serve(lab, prefill_tp=8, batch=SERVE_DISAGG_BATCH).disaggregated
             for lab in ctx.fabrics}
    ctx.heading("Serving Llama 3 70B")
    ctx.add(f"FP8 weights and KV cache, prompts of {SERVE_PROMPT:,} tokens, "
            f"{SERVE_OUTPUT} output tokens, TensorRT-LLM's host costs. One instance is one "
            "server (TP 8): continuous batching grows the batch until an iteration takes "
            "the time-per-output-token target, each iteration also prefilling the prompts "
            "that replace finished sequences (`fabricsim infer --model llama3-70b --tp 8 "
            f"--precision fp8 --prompt-len {SERVE_PROMPT} --output-len {SERVE_OUTPUT} "
            "--tpot-target-ms 30`).", "")
    ctx.table(["TPOT target", "batch", "limited by", "TPOT (ms)", "TTFT (ms)",
               "tokens/s per GPU"],
              [[f"{ms} ms", r.batch, r.limited_by, f"{r.tpot_s * 1e3:.1f}",
                f"{r.ttft_s * 1e3:,.0f}", f"{r.tokens_per_s_per_gpu:,.0f}"]
               for ms, r in zip(SERVE_TPOT_MS, frontier, strict=True)])
    ctx.add("An instance stays inside one server, so its traffic stays on NVLink and the "
            "fabric does not change these figures. It does when prefill and decode run on "
            "different servers (disaggregated serving): each request's KV cache crosses the "
            f"scale-out network, layer by layer as the prefill proceeds "
            f"(`--prefill-tp 8 --batch {SERVE_DISAGG_BATCH}`).", "")
    ctx.table(["fabric", "KV cache per request", "KV transfer", "of it exposed",
               "TTFT (ms)", "TPOT (ms)", "tokens/s per GPU", "prefill instances per decode"],
              [[lab, _size(int(r.kv_bytes_per_request)), _ms(r.kv_transfer_s),
                _ms(r.kv_exposed_s), f"{r.ttft_s * 1e3:,.1f}", f"{r.tpot_s * 1e3:.2f}",
                f"{r.tokens_per_s_per_gpu:,.0f}", f"{r.prefill_instances_per_decode:.2f}"]
               for lab, r in pairs.items()])
    pair = pairs[label]
    marks = [{"label": f"disaggregated 8 + 8 GPUs, decode batch {SERVE_DISAGG_BATCH}",
              "tpot_s": pair.tpot_s, "tokens_per_s_per_gpu": pair.tokens_per_s_per_gpu}]
    ctx.figure(plot_serving_frontier(
        [{"tpot_s": r.tpot_s, "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
          "batch": r.batch} for r in frontier], ctx.out / "serving.png", marks=marks,
        title=f"Llama 3 70B FP8 on H100, prompt {SERVE_PROMPT:,}, output {SERVE_OUTPUT}"),
        "serving throughput against time per output token")
    near = min(frontier, key=lambda r: abs(r.tpot_s - pair.tpot_s))
    ctx.add(f"Decoding without prefills in its iterations, the disaggregated pair streams "
            f"at {pair.tpot_s * 1e3:.1f} ms per token with {SERVE_DISAGG_BATCH} sequences "
            f"and {pair.tokens_per_s_per_gpu:,.0f} tokens/s per GPU over both instances; "
            f"one colocated instance at a {near.tpot_s * 1e3:.0f} ms TPOT holds a batch of "
            f"{near.batch} for {near.tokens_per_s_per_gpu:,.0f} tokens/s per GPU. Of the KV "
            f"cache's {_ms(pair.kv_transfer_s)} on {label}, all but "
            f"{_ms(pair.kv_exposed_s)} hides behind the prefill.", "")


#: The shared-cluster section: the demo's training job on half the design beside a
#: Llama 3 8B fine-tune on the other half, and one server of the first failing.
SHARED_FINETUNE = {"model": "llama3-8b", "tp": 1, "global_batch": 128, "seq_len": 8192}


def section_shared(ctx: DemoContext) -> None:
    """Section 8: two jobs sharing the design, placed spread, and a server failing under
    the larger (``fabricsim cluster``)."""
    ctx.step("shared cluster")
    rows: list[list[object]] = []
    fails: list[list[object]] = []
    worst = 1.0
    for label, sc in ctx.designs.items():
        train = (sc.training.model_dump(exclude_unset=True) if sc.training is not None
                 else {})
        shared = sc.model_copy(update={"training": None}).model_dump(exclude_unset=True)
        shared.update({"placement": "spread", "failure": {"servers": [0]}, "jobs": [
            {"name": "llama3-70b", "gpus": 128, "training": train},
            {"name": "llama3-8b-sft", "gpus": 128, "training": SHARED_FINETUNE}]})
        job = jobs.job_from_scenario("cluster", Scenario.model_validate(shared))
        d = jobs.run(job, ctx.fabrics[label]).to_dict()["placements"][0]
        for j in d["jobs"]:
            worst = max(worst, j["slowdown"])
            rows.append([label, j["job"], j["gpus"], f"{j['step_alone_s']:.3f}",
                         f"{j['step_shared_s']:.3f}", f"×{j['slowdown']:.3f}"])
        for f in d["failure"]["jobs"]:
            gh = f["gpu_hours_lost"]
            fails.append([label, f["job"], f"{gh['with_spares']:,.0f}", f"{gh['wait']:,.0f}",
                          "—" if gh["shrink"] is None else f"{gh['shrink']:,.0f}"])
    ctx.heading("Two jobs on one cluster, and a server that fails")
    ctx.add("The training job above on 128 GPUs beside a Llama 3 8B fine-tune on the other "
            "128, each job's servers dealt over the leaf switches (`fabricsim cluster`, "
            "docs/cluster.md). " + (
                "On this non-blocking rail-optimized design the jobs' traffic stays on "
                "their own rails and leaves: neither slows the other. " if worst < 1.0005
                else f"They slow each other by up to {(worst - 1) * 100:.1f} %. ") +
            "Where spine links are shared (larger or oversubscribed fabrics, hashed ECMP) "
            "jobs meet; `examples/clusters/four-jobs.yaml` shows it on 512 GPUs.", "")
    ctx.table(["fabric", "job", "GPUs", "step alone (s)", "step shared (s)", "slowdown"],
              rows)
    ctx.add("", "Then server 0 fails under the 70B job: the GPU-hours it loses restarting "
            "on a spare server, waiting 4 hours for the repair (an assumption), or "
            "training on the data-parallel replicas that kept their GPUs meanwhile.", "")
    ctx.table(["fabric", "job", "with a spare", "waiting for the repair",
               "shrinking to the survivors"], fails)


def section_day(ctx: DemoContext) -> None:
    """Section 10: a synthetic day of jobs replayed on each design by both schedulers
    (``fabricsim cluster`` with a ``trace:``)."""
    ctx.step("a day of jobs")
    rows: list[list[object]] = []
    lost = 0.0
    n = 0
    for label, sc in ctx.designs.items():
        day = sc.model_copy(update={"training": None}).model_dump(exclude_unset=True)
        day["trace"] = {"synthetic": {"load": 1.1}, "training": {"model": "llama3-8b",
                                                               "tp": 8}}
        job = jobs.job_from_scenario("cluster", Scenario.model_validate(day),
                                     schedulers=("fifo", "topology"))
        d = jobs.run(job, ctx.fabrics[label]).to_dict()["trace"]
        n = d["jobs"]
        for r in d["replays"]:
            lost = max(lost, r["interference_gpu_hours"])
            rows.append([label, r["scheduler"], f"{r['finished']} of {r['jobs']}",
                         f"{r['utilisation']:.1%}", f"{r['wait_mean_s'] / 60:.0f} min",
                         f"{r['idle_while_queued_gpu_hours']:,.0f}",
                         f"{r['fragmented_gpu_hours']:,.0f}",
                         f"{r['interference_gpu_hours']:,.1f}"])
    ctx.heading("A day of jobs on the design")
    ctx.add(f"{n} jobs in a synthetic day shaped like the Helios traces (most take "
            "one GPU for minutes, a few take 16-128 GPUs for hours; offered load 110 % of "
            "the GPUs), replayed through a first-in first-out scheduler blind to the "
            "topology and one that keeps each job under one leaf group (`fabricsim "
            "cluster` with a `trace:`; examples/clusters/trace-day.yaml replays a day on "
            "512 GPUs). " + (
                "Every server of this design hangs off one leaf group, so no job's traffic "
                "meets another's, on either fabric: what the day costs is the queue, GPUs "
                "left idle while a large job at its head waits for enough of them (strict "
                "first-in first-out, no backfilling)." if lost < 0.05 else
                f"Up to {lost:,.1f} GPU-hours go to interference."), "")
    ctx.table(["fabric", "scheduler", "finished", "GPUs busy", "mean wait",
               "GPU-h idle while queued", "of them fragmented",
               "GPU-h lost to interference"], rows)


def _fault() -> FaultSpec:
    return FaultSpec(type="link_degraded", link=FAULT_LINK, factor=FAULT_FACTOR)


def section_fault(ctx: DemoContext) -> None:
    """Section 7: one degraded NIC link on the flow backend, the bottleneck it makes, and
    what it costs a training job."""
    from fabricsim.plots.fault import plot_flow_fault
    from fabricsim.plots.heatmap import link_heatmap
    from fabricsim.plots.training import plot_step_breakdown
    from fabricsim.scenario.cluster import CollectiveSpec

    ctx.step("fault")
    label, fab = next(iter(ctx.fabrics.items()))
    sc = ctx.designs[label]
    price = _price(sc)
    hurt_sc = sc.model_copy(update={"faults": [_fault()], "collective": CollectiveSpec(
        collective="all_reduce", maxbytes=2**30,
        ranks=list(range(0, 64, 8)))})  # one rank per server of the first 8: DP-like
    flow = jobs.run(jobs.job_from_scenario("simulate", hurt_sc, record=True), fab)
    ok, res = flow.base, flow.hit
    train = jobs.run(jobs.job_from_scenario(
        "train", hurt_sc, over=TrainingSection.model_validate({"backend": "flow"})), fab)
    base, hurt = train.fault_free, train.step
    assert base is not None
    slow = hurt.step_time_s / base.step_time_s - 1
    lost_gpus = fab.n_gpus * (1 - base.step_time_s / hurt.step_time_s)
    ctx.heading("A fault, its bottleneck and its cost")
    ctx.add(f"On the {label} design, one NIC link (`{FAULT_LINK}`) runs at "
            f"{FAULT_FACTOR * 100:g} % of its speed — a port that trained down, "
            "or a dirty optic. NCCL does not route around it: every collective whose ring "
            "crosses that NIC runs at its pace (the flow backend, max-min fair sharing; "
            "`fabricsim train SCENARIO --backend flow` with the fault in its faults: "
            "section).", "")
    ctx.table(["", "fault-free", "degraded", "slowdown"], [
        ["1 GiB all-reduce over 8 servers (rail 0)", _ms(ok.time), _ms(res.time),
         f"{res.time / ok.time:.2f}×"],
        ["training step (Llama 3 70B)", f"{base.step_time_s:.3f} s",
         f"{hurt.step_time_s:.3f} s", f"+{slow * 100:.1f} %"],
    ])
    ctx.figure(plot_flow_fault(ok, res, ctx.out / "fault.png",
                               title="1 GiB all-reduce over 8 servers: fault-free vs one "
                               "link at 25 %"), "fault-free vs degraded all-reduce")
    faulty = tuple(int(l) for ls in res.extra["fault_links"].values() for l in ls)
    top = res.extra["bottlenecks"][0] if res.extra["bottlenecks"] else None
    if top is not None:
        ctx.add(f"The bottleneck: `{top['name']}` ({top['kind']}) held back the slowest "
                f"transfer for {_ms(top['critical_time'])} of the {_ms(res.time)} — the "
                "degraded link, marked ▶ below with the links that limited the run next "
                "(`fabricsim simulate flow-degraded-link --out results/` draws the same for "
                "the whole 256-GPU ring).", "")
    ctx.figure(link_heatmap(res.extra["timeline"], ctx.out / "bottleneck.png",
                            highlight=faulty, rank="critical",
                            critical=res.extra["critical_time"], top=16,
                            title="degraded all-reduce: links by the time they limited it"),
               "bottleneck link heatmap")
    ctx.figure(plot_step_breakdown({"fault-free": dict(base.breakdown),
                                    "degraded": dict(hurt.breakdown)},
                                   ctx.out / "fault_step.png",
                                   title="Llama 3 70B step, fault-free vs one degraded link"),
               "training step with and without the fault")
    per_day = lost_gpus * 24 * price
    ctx.add(f"The whole synchronous job waits for the slowest group: the fault costs the "
            f"equivalent of **{lost_gpus:.1f} idle GPUs**, **${per_day:,.0f} per day** at "
            f"${price:g}/GPU-hour, until someone finds the link.", "")


def section_packet(ctx: DemoContext) -> None:
    """Section 8: a PFC pause storm at packet level, with and without the watchdog."""
    from fabricsim.reports.scenario import section_packet as packet
    from fabricsim.scenario import load_scenario

    sc = load_scenario(PAUSE_SCENARIO)
    runs = packet(ctx, sc, prefix="storm_", title="A PFC pause storm and the watchdog")
    by = {r.summary["variant"]: r.summary for r in runs}
    base, bare = by.get("base"), by.get("no-watchdog")
    if base is not None and bare is not None:
        wd = base["watchdog_triggers"]
        ctx.add(f"A receiver that hangs keeps pausing its switch port. Without the PFC "
                f"watchdog the pause reaches {bare['pause']['ports_paused']} ports up to "
                f"{bare['pause']['max_hops']} hops from it, and ports stay paused for "
                f"{bare['pause']['pause_time_total_s'] * 1e3:,.1f} ms in all; with it "
                f"(tripped {wd} time{'s' if wd != 1 else ''}, dropping the stuck port's "
                f"traffic rather than pausing on) "
                f"{base['pause']['pause_time_total_s'] * 1e3:,.1f} ms. RoCEv2 only: "
                "InfiniBand's credit-based flow control has no pause frames to storm.", "")


#: Sections in report order.
SECTIONS: dict[str, Callable[[DemoContext], None]] = {
    "cluster": section_cluster,
    "allreduce": section_allreduce,
    "moe": section_moe,
    "training": section_training,
    "scaling": section_scaling,
    "plan": section_plan,
    "serving": section_serving,
    "fault": section_fault,
    "shared": section_shared,
    "day": section_day,
    "packet": section_packet,
}


def write_demo(out: str | Path, *, sections: Sequence[str] | None = None,
               progress: Callable[[str], None] | None = None,
               time_limit_s: float | None = None) -> Path:
    """Write ``report.md``, ``report.html`` and plots for the reference design into
    ``out``; returns the path of ``report.md``. ``time_limit_s`` stops it (a
    SimulationError naming ``--time-limit``) before a section once that much wall time
    has passed."""
    import time

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    designs = {label: design_scenario(name) for label, name in DESIGNS}
    fabrics = {label: jobs.job_from_scenario("describe", sc).cluster.build()
               for label, sc in designs.items()}
    ctx = DemoContext(out=folder, designs=designs, fabrics=fabrics,
                      progress=progress or (lambda m: None),
                      deadline=None if time_limit_s is None
                      else time.perf_counter() + time_limit_s)
    ctx.add("# fabricsim demo: 256 × H100, InfiniBand NDR vs RoCEv2", "",
            "The seeds' reference design: 32 servers of 8 H100 GPUs. Every figure below is "
            "computed by fabricsim as this report is written.", "")
    for name in sections or list(SECTIONS):
        SECTIONS[name](ctx)
    return ctx.write().markdown
