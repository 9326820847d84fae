"""fabricsim's Ultra Ethernet transport side by side with the UEC's htsim (``htsim_uec``).

The same cases run in both simulators on the same non-blocking two-tier fat-tree (16
hosts: 4 leaves x 4 hosts, 4 spines; 32 hosts: 4 leaves x 8 hosts, 8 spines), 100 Gb/s
links of 1 us (no extra switch latency), store-and-forward switches, 4096 B of payload
and 64 B of headers per packet (htsim ``-mtu 4160``, fabricsim ``mtu 4096`` and
``header_bytes 64``):

* ``permutation``: every host sends 2 MB to one other host (a seeded derangement);
* ``all_to_all``: every host sends 256 kB to every other host, all at once;
* ``incast``: N/2 hosts of the far leaves send 2 MB each to host 0 (8:1 on 16 hosts).

Switch queues are htsim's default for a trimming fabric, one bandwidth-delay product
(``htsim_io.bdp_packets``: 29 packets, 120,640 B, on this fabric), given to htsim as
``-q`` and to fabricsim as ``uet.trim_threshold_bytes`` (htsim trims when its data queue
is full); ECN marks from 0.2 to 0.8 BDP, linear, on both (htsim ``-ecn``, fabricsim
``ecn.kmin/kmax`` with ``pmax 1``). Everything else is each simulator's own default: NSCC
on both; REPS load balancing over 64 entropies on both (htsim ``mixed``, fabricsim
``reps``; ``--load-balance`` and ``--entropies`` change fabricsim's); each side's RTO,
start window and NSCC constants.

One JSON line per (case, simulator): completion time (last flow finish), mean and p99
flow completion time, trims (htsim: NACKs received; fabricsim: trimmed packets),
retransmissions and wall time; the fabricsim line also holds ``ratio`` (fabricsim /
htsim) of each. htsim's finish time is the sender's (its last ACK back), fabricsim's the
receiver's (its last byte in): htsim's are later by about one ACK's way back.

htsim runs as a subprocess: its binary from ``--htsim PATH`` (the file, or the directory
holding it), else ``$HTSIM_UEC_BIN``, else ``htsim_uec`` on ``PATH``. Without it each
htsim line says ``peer_unavailable`` and why, and fabricsim still runs.

Usage:
    python benchmarks/uet_vs_htsim.py [--htsim PATH] [--hosts 16|32]
                                      [--cases permutation,all_to_all,incast] [--seed 1]
                                      [--load-balance reps|oblivious] [--entropies N]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "htsim"))
from htsim_io import (
    bdp_packets,
    connection_matrix,
    find_binary,
    parse_output,
    topology_file,
)

from fabricsim.backends.flow.testing import host_fat_tree
from fabricsim.backends.packet import PacketBackend
from fabricsim.schedule import Schedule, Step

GBPS = 100
LATENCY = 1e-6
PAYLOAD = 4096
HEADER = 64
WIRE = PAYLOAD + HEADER
CASES = ("permutation", "all_to_all", "incast")


def layout(n: int) -> tuple[int, int]:
    """Hosts per leaf and spines of the non-blocking two-tier fat-tree of ``n`` hosts."""
    k = math.isqrt(n)
    if k * k != n:
        k = n // 4
    if k < 1 or n % k:
        raise SystemExit(f"--hosts {n}: use a square or a multiple of 4 (16, 32, 64)")
    return k, k


def flows(case: str, n: int, seed: int) -> list[tuple[int, int, int]]:
    """``(src, dst, bytes)`` of every flow of ``case`` on ``n`` hosts."""
    if case == "permutation":
        rng = np.random.default_rng(seed)
        while True:
            p = rng.permutation(n)
            if not np.any(p == np.arange(n)):
                break
        return [(i, int(p[i]), 2_000_000) for i in range(n)]
    if case == "all_to_all":
        return [(i, j, 256_000) for i in range(n) for j in range(n) if i != j]
    if case == "incast":
        return [(i, 0, 2_000_000) for i in range(n // 2, n)]
    raise SystemExit(f"unknown case {case!r}: choose from {', '.join(CASES)}")


def summary(start: np.ndarray, end: np.ndarray, n_flows: int) -> dict[str, object]:
    fct = end - start
    return {
        "flows_done": int(fct.size), "flows": n_flows,
        "complete": bool(fct.size == n_flows),
        "time_us": round(float(end.max()), 2) if fct.size else None,
        "mean_fct_us": round(float(fct.mean()), 2) if fct.size else None,
        "p99_fct_us": round(float(np.percentile(fct, 99)), 2) if fct.size else None,
    }


def run_fabricsim(case: str, fl: list[tuple[int, int, int]], n: int, queue_pkts: int,
                  ecn: tuple[int, int], seed: int,
                  lb: dict[str, object] | None = None) -> dict[str, object]:
    k, spines = layout(n)
    fab = host_fat_tree(n, hosts_per_leaf=k, spines=spines, bandwidth=GBPS * 1e9 / 8,
                        latency=LATENCY)
    g = fab.gpus
    src = np.array([s for s, _, _ in fl])
    dst = np.array([d for _, d, _ in fl])
    size = np.array([b for _, _, b in fl], dtype=float)
    sch = Schedule(steps=(Step(src=g[src], dst=g[dst], nbytes=size),))
    be = PacketBackend(
        transport="uet", mtu=PAYLOAD, header_bytes=HEADER, switching="store-and-forward",
        seed=seed,
        ecn={"kmin": ecn[0] * WIRE, "kmax": ecn[1] * WIRE, "pmax": 1.0},
        uet={"trim_threshold_bytes": queue_pkts * WIRE, **(lb or {})},
        event_budget=100_000_000)
    t0 = time.perf_counter()
    r = be.run(sch, fab)
    wall = time.perf_counter() - t0
    e = r.extra
    start = np.asarray(e["fct"]["start"]) * 1e6
    end = np.asarray(e["fct"]["end"]) * 1e6
    return {"case": case, "simulator": "fabricsim", "status": e["status"],
            **summary(start, end, len(fl)),
            "trims": int(e["trims"]), "retransmits": int(e["retransmits"]),
            "timeouts": int(e["timeouts"]), "drops": int(sum(e["drops"].values())),
            "wall_s": round(wall, 3)}


def run_htsim(binary: str | None, reason: str, case: str, fl: list[tuple[int, int, int]],
              n: int, queue_pkts: int, ecn: tuple[int, int], end_us: int,
              seed: int) -> dict[str, object]:
    line: dict[str, object] = {"case": case, "simulator": "htsim"}
    if binary is None:
        return {**line, "peer_unavailable": reason}
    k, spines = layout(n)
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp, "fabric.topo")
        cm = Path(tmp, "case.cm")
        topo.write_text(topology_file(n, k, spines, GBPS, round(LATENCY * 1e9)))
        cm.write_text(connection_matrix(n, fl))
        cmd = [binary, "-topo", str(topo), "-tm", str(cm), "-mtu", str(WIRE),
               "-q", str(queue_pkts), "-ecn", str(ecn[0]), str(ecn[1]),
               "-end", str(end_us), "-seed", str(seed), "-o", str(Path(tmp, "log.dat"))]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=3600,
                               check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {**line, "peer_unavailable": f"htsim_uec did not run: {exc}"}
        wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {**line, "peer_unavailable": f"htsim_uec exited {p.returncode}: "
                + " | ".join(tail)}
    out = parse_output(p.stdout)
    ids = sorted(out["finish_us"])
    start = np.array([out["start_us"].get(i, 0.0) for i in ids])
    end = np.array([out["finish_us"][i] for i in ids])
    tot = out["totals"]
    return {**line, "status": "ok" if len(ids) == len(fl) else "incomplete",
            **summary(start, end, len(fl)),
            "trims": tot.get("nacks"), "retransmits": tot.get("rtx"),
            "packets": tot.get("new"), "wall_s": round(wall, 3)}


def ratios(fab: dict[str, object], hts: dict[str, object]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in ("time_us", "mean_fct_us", "p99_fct_us", "trims", "retransmits", "wall_s"):
        a, b = fab.get(key), hts.get(key)
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0
        out[key] = round(a / b, 3) if ok else None  # type: ignore[operator]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--htsim", help="htsim_uec binary (or its directory); "
                    "default $HTSIM_UEC_BIN, then PATH")
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--end-us", type=int, default=100_000,
                    help="htsim's simulated-time limit (-end), microseconds")
    ap.add_argument("--no-htsim", action="store_true", help="run fabricsim alone")
    ap.add_argument("--load-balance", choices=("reps", "oblivious"),
                    help="fabricsim's packet.uet.load_balance (default: its own)")
    ap.add_argument("--entropies", type=int,
                    help="fabricsim's packet.uet.entropies (default: its own)")
    a = ap.parse_args()
    lb: dict[str, object] = {}
    if a.load_balance:
        lb["load_balance"] = a.load_balance
    if a.entropies:
        lb["entropies"] = a.entropies

    n = a.hosts
    queue_pkts = bdp_packets(GBPS, LATENCY, WIRE, tiers=2)
    ecn = (math.ceil(0.2 * queue_pkts), math.ceil(0.8 * queue_pkts))
    binary, reason = (None, "--no-htsim") if a.no_htsim else find_binary(a.htsim)
    # compile fabricsim's kernels once so its wall times are the runs', not numba's
    run_fabricsim("warm-up", [(0, n - 1, 100_000)], n, queue_pkts, ecn, a.seed, lb)
    for case in a.cases.split(","):
        fl = flows(case, n, a.seed)
        hts = run_htsim(binary, reason, case, fl, n, queue_pkts, ecn, a.end_us, a.seed)
        fab = run_fabricsim(case, fl, n, queue_pkts, ecn, a.seed, lb)
        common = {"hosts": n, "seed": a.seed, "queue_pkts": queue_pkts, **lb,
                  "queue_bytes": queue_pkts * WIRE, "ecn_pkts": list(ecn)}
        print(json.dumps({**hts, **common}), flush=True)
        print(json.dumps({**fab, **common, "ratio_fabricsim_over_htsim":
                          ratios(fab, hts) if "peer_unavailable" not in hts else None}),
              flush=True)


if __name__ == "__main__":
    main()
