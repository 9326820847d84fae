"""Packet fidelity where congestion lives: a flow run, corrected link by link.

The flow backend times a whole fabric quickly but as fluid: no packets, queues, pause
frames, ECN marks or rate control. The packet backend has all of those and stops at a
few hundred hosts. :class:`HybridBackend` runs the flow backend on the whole schedule,
takes its busiest network links (bytes over capacity; not NVLink or PCIe) that ever
carried several transfers at once (where congestion lives), and for each such link
builds a small fabric of its own: a host per node where its transfers enter the network
(a NIC: its transfers share its send queue, as they do), a switch per network link that
feeds it (a transfer's previous hop), the link and a sink, with those links' capacities
and the latencies before and at the link. Every transfer that crossed the link in the
flow run starts there when it started in the flow run, and the small fabric is timed
twice: at packet level
(:class:`~fabricsim.backends.packet.PacketBackend`, the fabric's transport with its PFC,
ECN/DCQCN, credits or spraying) and as fluid (the flow backend). A transfer's hybrid
completion time is its flow-run time plus, for every such link on its path, what the
packet level added there over the fluid:

    FCT_hybrid = FCT_flow + sum over the simulated links on its path of
                 (FCT_packet(link) - FCT_fluid(link))

The links are independent runs: they go to a local process pool (``workers``), or to a
Ray cluster (``ray_address``) when one machine is not enough. What it leaves out: a
link's packet run sees its flows as they arrived in the flow run (a pause that slows a
flow upstream does not move its later arrivals), and links not chosen keep the fluid's
answer. ``benchmarks/hybrid_packet.py`` measures it against the full packet backend.

Example
-------
>>> import numpy as np
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(16, hosts_per_leaf=4, bandwidth=12.5e9)
>>> incast = Step(src=fab.gpus[4:12], dst=np.full(8, fab.gpus[0]), nbytes=np.full(8, 2e5))
>>> r = HybridBackend(links=2, transport="roce").run(Schedule(steps=(incast,)), fab)
>>> r.extra["links_simulated"] >= 1, r.time >= r.extra["flow_time"] * 0.5
(True, True)
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.base import Result
from fabricsim.errors import ConfigError
from fabricsim.fabric.core import Fabric
from fabricsim.schedule.core import Schedule, Step

__all__ = ["HybridBackend", "LinkProblem", "solve_link"]

F8 = NDArray[np.float64]
I8 = NDArray[np.int64]


@dataclass(frozen=True)
class LinkProblem:
    """One congested link as a fabric of its own.

    Senders are the nodes where the transfers enter the network (a NIC, or a host); each
    reaches the link through a feeding network link (``host_feeder``) or, when the link
    is its own first network hop, directly (-1). Per sender: the capacity and latency of
    its first network link; per feeder: its capacity and latency; the link's own; per
    transfer: its sender, bytes and start.
    """

    link: int
    name: str
    host_cap: F8
    host_lat: F8
    host_feeder: I8
    feed_cap: F8
    feed_lat: F8
    cap: float
    lat: float
    sender: I8
    nbytes: F8
    start: F8


def _most_at_once(start: F8, end: F8) -> int:
    """The most intervals ``[start, end)`` open at one instant.

    >>> _most_at_once(np.array([0.0, 1.0, 2.0]), np.array([3.0, 2.0, 4.0]))
    2
    """
    t = np.concatenate([start, end])
    d = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    o = np.lexsort((d, t))  # an end before a start at the same instant
    return int(np.cumsum(d[o]).max()) if t.size else 0


def _funnel(p: LinkProblem, transport: str) -> Fabric:
    """Senders -> a switch per feeding link -> the link's switch -> sink. A sender with
    no feeder joins the link's switch directly at the link's rate (its queue is its
    own send queue: the transfers of one NIC share it as they do)."""
    from fabricsim.backends.packet.testbeds import hosts_and_switches
    from fabricsim.fabric.builder import FabricBuilder
    from fabricsim.fabric.kinds import LinkKind, NodeKind

    n = p.host_cap.shape[0]
    m = p.feed_cap.shape[0]
    b = FabricBuilder()
    hosts = b.add_nodes(NodeKind.GPU, n + 1)  # the last one is the sink
    feed = b.add_nodes(NodeKind.LEAF, m, group=0) if m else np.zeros(0, np.int32)
    sw = b.add_nodes(NodeKind.SPINE, 1)
    via = p.host_feeder >= 0
    if via.any():
        b.add_links(hosts[:n][via], feed[p.host_feeder[via]], p.host_cap[via],
                    np.maximum(p.host_lat[via], 1e-9), LinkKind.NIC_LEAF)
    if (~via).any():
        b.add_links(hosts[:n][~via], np.full(int((~via).sum()), sw[0]), p.cap, 1e-9,
                    LinkKind.NIC_LEAF)
    if m:
        b.add_links(feed, np.full(m, sw[0]), p.feed_cap, np.maximum(p.feed_lat, 1e-9),
                    LinkKind.LEAF_SPINE)
    b.add_links(sw, hosts[n:], p.cap, max(p.lat, 1e-9), LinkKind.NIC_LEAF)
    return hosts_and_switches(b, hosts, transport, float(p.cap), "funnel")


def _schedule(p: LinkProblem, fab: Fabric) -> tuple[Schedule, I8]:
    """The link's transfers, one step per distinct start (its ``delay``), and the order
    in which the steps list them (position in the problem -> position in the steps)."""
    hosts = np.asarray(fab.gpus)
    sink = int(hosts[-1])
    starts, inv = np.unique(np.round(p.start, 12), return_inverse=True)
    steps, order = [], []
    for k, t0 in enumerate(starts):
        idx = np.flatnonzero(inv == k)
        order.append(idx)
        steps.append(Step(src=hosts[p.sender[idx]], dst=np.full(idx.size, sink),
                          nbytes=p.nbytes[idx], delay=float(max(t0, 0.0)),
                          label=f"start {t0 * 1e6:.3f} us"))
    return Schedule(steps=tuple(steps)), np.concatenate(order)


def _ends(res: Result, n: int, order: I8, packet: Schedule | None) -> F8:
    """Every transfer's end in the problem's order, from a run of :func:`_schedule`
    (``packet``: None for the flow run, else the schedule the packet run ran)."""
    out = np.full(n, np.nan)
    if packet is None:
        tr = res.extra["transfers"]
        step = np.asarray(tr["step"], dtype=np.int64)
        within = np.asarray(tr["transfer"], dtype=np.int64)
        ends = np.asarray(tr["end"], dtype=np.float64)
        sizes = np.bincount(step, minlength=int(step.max()) + 1 if step.size else 0)
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        out[order[first[step] + within]] = ends
        return out
    fct = res.extra["fct"]
    flow = np.asarray(fct["flow"], dtype=np.int64)
    out[order[flow]] = np.asarray(fct["end"], dtype=np.float64)
    return out


def solve_link(p: LinkProblem, transport: str, packet: dict[str, Any], seed: int
               ) -> tuple[F8, F8, dict[str, Any]]:
    """(packet ends, fluid ends, the packet run's counters) of one link's transfers.

    A module-level function so a process pool or Ray can run it."""
    from fabricsim.backends.flow import FlowBackend
    from fabricsim.backends.packet import PacketBackend

    fab = _funnel(p, transport)
    sched, order = _schedule(p, fab)
    n = p.nbytes.shape[0]
    # a funnel is a few links however many senders it has: its endpoint count is not
    # what bounds its run (its packets are), so the limit follows its senders
    opts = {"max_endpoints": max(1024, p.host_cap.shape[0] + 2), **packet}
    pk = PacketBackend(seed=seed, transport=transport, **opts).run(sched, fab)
    fl = FlowBackend(seed=seed, record_timeline=True, exploit_repeats=False).run(sched, fab)
    drops = pk.extra.get("drops", {})
    stats = {"link": p.name, "flows": int(n), "senders": int(p.host_cap.shape[0]),
             "feeders": int(p.feed_cap.shape[0]),
             "status": pk.extra.get("status"), "pause_frames": pk.extra.get("pause_frames"),
             "ecn_marks": pk.extra.get("ecn_marks"), "drops": drops,
             "wall_s": pk.extra.get("wall_s")}
    return _ends(pk, n, order, sched), _ends(fl, n, order, None), stats


@dataclass(frozen=True)
class HybridBackend:
    """Flow run of the whole fabric, packet runs of its most congested links.

    Parameters
    ----------
    links
        How many of the flow run's busiest links (bytes over capacity) are simulated at
        packet level.
    min_flows
        A link needs at least this many transfers on it at once to be simulated (one flow
        at a time has no congestion to show).
    workers
        Local processes for the links' packet runs (1: in this process).
    ray_address
        Run the links on this Ray cluster instead (``"auto"``: the one this machine
        joined; ``"local"``: a new one on this machine); needs the ``ray`` extra.
    transport
        The packet runs' transport (default: the fabric's).
    packet
        :class:`~fabricsim.backends.packet.PacketConfig` fields for the packet runs.
    """

    links: int = 8
    min_flows: int = 2
    workers: int = 1
    ray_address: str | None = None
    seed: int = 0
    transport: str | None = None
    packet: dict[str, Any] = field(default_factory=dict)
    name: str = "hybrid"

    def __post_init__(self) -> None:
        if self.links < 1:
            raise ConfigError(f"links must be >= 1, got {self.links}", field="links")
        if self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}", field="workers")
        if self.min_flows < 2:
            raise ConfigError(f"min_flows must be >= 2, got {self.min_flows}",
                              field="min_flows")

    def problems(self, schedule: Schedule, fabric: Fabric, flow: Result
                 ) -> tuple[list[LinkProblem], list[I8]]:
        """The links to simulate, as problems, and for each the transfers (rows of the flow
        run's ``transfers`` table) that crossed it."""
        from fabricsim.backends.flow import FlowBackend
        from fabricsim.backends.flow.routing import expand

        tr = flow.extra["transfers"]
        step = np.asarray(tr["step"], dtype=np.int64)
        within = np.asarray(tr["transfer"], dtype=np.int64)
        start = np.asarray(tr["start"], dtype=np.float64)
        nbytes = np.asarray(tr["nbytes"], dtype=np.float64)
        routing = FlowBackend(seed=self.seed).routing_for(fabric)
        qps = fabric.info.qps
        paths: list[list[I8]] = []
        for s in schedule.steps:  # each transfer's links (all its queue pairs' together)
            ex = expand(fabric, s.src, s.dst, s.nbytes, hashes=s.hashes, mode=routing,
                        qps=qps, seed=self.seed, channel=s.channel)
            # a transfer's jobs are contiguous (tags ascend), so are their entries
            cut = ex.flow_ptr[ex.job_fptr[np.searchsorted(ex.tag, np.arange(s.n + 1))]]
            paths.append([ex.links[cut[t]:cut[t + 1]] for t in range(s.n)])
        cap = np.asarray(fabric.link_capacity, dtype=np.float64)
        lat = np.asarray(fabric.link_latency, dtype=np.float64)
        end = np.asarray(tr["end"], dtype=np.float64)
        # every (transfer, link) of the run, with the link's place on the transfer's path
        e_row, e_link, e_pos = [], [], []
        for r in range(step.shape[0]):
            path = paths[int(step[r])][int(within[r])]
            e_row.append(np.full(path.size, r, dtype=np.int64))
            e_link.append(path)
            e_pos.append(np.arange(path.size, dtype=np.int64))
        rows_e = np.concatenate(e_row) if e_row else np.zeros(0, np.int64)
        links_e = np.concatenate(e_link) if e_link else np.zeros(0, np.int64)
        pos_e = np.concatenate(e_pos) if e_pos else np.zeros(0, np.int64)
        order = np.argsort(links_e, kind="stable")
        rows_e, links_e, pos_e = rows_e[order], links_e[order], pos_e[order]
        cut = np.searchsorted(links_e, np.arange(fabric.n_links + 1))
        # where congestion lives: the links busiest in the flow run (bytes over capacity)
        # among those that ever carried min_flows transfers at once
        busy = np.asarray(flow.link_bytes, dtype=np.float64) / np.maximum(cap, 1e-30)
        # the network's links only: the transport's packets, pauses and marks live there
        # (NVLink and PCIe inside a server carry no RoCE, InfiniBand or SRD)
        from fabricsim.fabric.cluster import NETWORK_LINK_KINDS
        from fabricsim.fabric.kinds import LinkKind

        network = np.isin(np.asarray(fabric.link_kind),
                          [int(k) for k in (*NETWORK_LINK_KINDS, LinkKind.STORAGE)])
        busy = np.where(network, busy, 0.0)
        chosen: list[LinkProblem] = []
        rows: list[I8] = []
        for link in np.argsort(-busy, kind="stable"):
            if len(chosen) >= self.links or busy[link] <= 0:
                break
            sel = slice(cut[link], cut[link + 1])
            hit, k_at = rows_e[sel], pos_e[sel]
            if hit.size < self.min_flows or _most_at_once(start[hit], end[hit]) < \
                    self.min_flows:
                continue
            senders, feeders, h_cap, h_lat = [], [], {}, {}
            for r, k in zip(hit.tolist(), k_at.tolist(), strict=True):
                path = paths[int(step[r])][int(within[r])]
                on_net = np.flatnonzero(network[path[:k + 1]])
                first = int(on_net[0]) if on_net.size else k
                node = int(fabric.link_src[path[first]])  # where it enters the network
                senders.append(node)
                # the network link that feeds this one (none: it is the first network hop)
                q = int(path[k - 1]) if k > first else -1
                feeders.append(q)
                h_cap[node] = float(cap[path[first]])
                h_lat[node] = float(lat[path[first:max(k - 1, first)]].sum())
            s_keys, sender = np.unique(np.array(senders), return_inverse=True)
            f_arr = np.array(feeders)
            q_keys = np.unique(f_arr[f_arr >= 0])
            host_feeder = np.full(s_keys.size, -1, dtype=np.int64)
            for i in range(len(senders)):  # a sender's feeder (its first transfer's)
                if f_arr[i] >= 0 and host_feeder[sender[i]] < 0:
                    host_feeder[sender[i]] = int(np.searchsorted(q_keys, f_arr[i]))
            idx = np.asarray(hit, dtype=np.int64)
            chosen.append(LinkProblem(
                link=int(link), name=fabric.link_name(int(link)),
                host_cap=np.array([h_cap[int(x)] for x in s_keys]),
                host_lat=np.array([h_lat[int(x)] for x in s_keys]),
                host_feeder=host_feeder, feed_cap=cap[q_keys].astype(np.float64),
                feed_lat=lat[q_keys].astype(np.float64), cap=float(cap[link]),
                lat=float(lat[link]), sender=sender.astype(np.int64),
                nbytes=nbytes[idx], start=start[idx]))
            rows.append(idx)
        return chosen, rows

    def _solve_all(self, problems: Sequence[LinkProblem], transport: str
                   ) -> list[tuple[F8, F8, dict[str, Any]]]:
        args = [(p, transport, dict(self.packet), self.seed) for p in problems]
        if self.ray_address is not None:
            try:
                import ray
            except ImportError as e:
                raise ConfigError("ray_address needs Ray: pip install 'fabricsim[ray]'",
                                  field="ray_address") from e
            started = not ray.is_initialized()
            try:
                ray.init(address=self.ray_address, ignore_reinit_error=True,
                         log_to_driver=False)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise ConfigError(f"cannot reach the Ray cluster at {self.ray_address!r}: "
                                  f"{e}; give its address (ray://host:10001), 'auto' on a "
                                  f"node of it, or 'local'", field="ray_address") from None
            try:
                remote = ray.remote(solve_link)
                return list(ray.get([remote.remote(*a) for a in args]))
            finally:
                if started:  # leave the process as it was found
                    ray.shutdown()
        if self.workers > 1 and len(args) > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=min(self.workers, len(args))) as pool:
                return list(pool.map(solve_link, *zip(*args, strict=True)))
        return [solve_link(*a) for a in args]

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        """The flow run of ``schedule`` with every transfer's completion corrected by the
        packet runs of its congested links; ``extra`` has both times per transfer
        (``fct``: ``flow``, ``hybrid``), the links simulated and their counters."""
        from dataclasses import replace

        from fabricsim.backends.flow import FlowBackend

        wall0 = _time.perf_counter()
        flow = FlowBackend(seed=self.seed, record_timeline=True,
                           exploit_repeats=False).run(schedule, fabric)
        tr = flow.extra["transfers"]
        start = np.asarray(tr["start"], dtype=np.float64)
        end = np.asarray(tr["end"], dtype=np.float64)
        transport = self.transport or fabric.info.transport or "roce"
        problems, rows = self.problems(schedule, fabric, flow)
        solved = self._solve_all(problems, transport)
        extra_t = np.zeros(end.shape[0])
        for idx, (pk_end, fl_end, _stats) in zip(rows, solved, strict=True):
            extra_t[idx] += np.nan_to_num(pk_end - fl_end)
        hybrid_end = end + extra_t
        fct_flow = end - start
        fct = np.maximum(fct_flow + extra_t, 0.0)
        time = float(max(flow.time + (np.nanmax(hybrid_end) - np.nanmax(end))
                         if end.size else flow.time, 0.0))
        extra = {**flow.extra, "flow_time": flow.time, "links_simulated": len(problems),
                 "links": [s for _a, _b, s in solved],
                 "fct": {"start": start, "flow": fct_flow, "hybrid": fct,
                         "step": tr["step"], "rep": tr["rep"], "transfer": tr["transfer"]},
                 "hybrid_wall_s": _time.perf_counter() - wall0}
        return replace(flow, time=time, backend=self.name, extra=extra)
