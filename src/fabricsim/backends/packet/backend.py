"""The packet-level backend: every packet, queue, pause, credit and timer of a Schedule.

Example
-------
>>> import numpy as np
>>> from fabricsim.schedule import Schedule, Step
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", nodes=2)
>>> sch = Schedule(steps=(Step(src=fab.gpus[:1], dst=fab.gpus[8:9], nbytes=[1e6]),))
>>> r = PacketBackend(mtu=4096).run(sch, fab)
>>> r.backend, r.extra["status"], round(r.time * 1e6, 1)
('packet', 'ok', 21.5)
"""

from __future__ import annotations

import time as _time
from dataclasses import replace
from typing import Any

import numpy as np

from fabricsim.backends.analytic import stream_start
from fabricsim.backends.base import (
    Result,
    crossing_cost,
    kernel_floor,
    pipeline_fill,
    schedule_protocol,
)
from fabricsim.backends.packet import layout as L
from fabricsim.backends.packet.budget import check_endpoints
from fabricsim.backends.packet.build import MODE_NAMES, MODES, State, build_state
from fabricsim.backends.packet.config import PacketConfig, parse_packet_config
from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric.core import Fabric
from fabricsim.protocols import get_protocol
from fabricsim.schedule.core import Schedule


class PacketBackend:
    """Discrete-event packet simulation of a Schedule on a Fabric.

    Parameters
    ----------
    mtu
        Payload bytes per packet; default: the transport's
        (:data:`fabricsim.transport.DEFAULT_MTU`, as the analytic and flow backends).
    seed
        Seed of every random choice (ECN marks, loss, spraying).
    event_budget
        Refuse up front (from a lower bound of the run's events: every transfer at least
        one packet, per-hop, credit and ACK events; see
        :mod:`~fabricsim.backends.packet.budget`) or stop a run beyond this many events.
        Schedules with more than ``max_endpoints`` (config, default 1024) distinct
        endpoints are refused before anything is built.
    transport
        ``"ib"`` (credits), ``"roce"`` (PFC + ECN + DCQCN), ``"tcp"`` (lossy, TCP-like) or
        ``"srd"`` (spraying) or ``"uet"`` (Ultra Ethernet: spraying, trimming, NSCC/RCCC,
        LLR, CBFC; :mod:`~fabricsim.backends.packet.uet`) or ``"slingshot"`` (HPE
        Slingshot's HPC Ethernet: credits as ``"ib"``, its 2048-byte packets and framing);
        default: the fabric's own transport.
    config
        A :class:`PacketConfig` or a ``packet:`` mapping; keyword ``options`` override its
        fields (``loss_rate=1e-4``, ``pfc={"enabled": False}``, ...). Its ``faults``
        (link down, degraded, flapping; :mod:`~fabricsim.backends.packet.faults`) are
        applied to the fabric given to :meth:`run`; a run can end with ``status``
        ``pfc_deadlock``, ``stalled`` or ``retry_exceeded`` (see
        :mod:`~fabricsim.backends.packet.report`).
    protocol
        NCCL protocol charged on the schedule's transfers, as by the analytic and flow
        backends (``"ll"``, ``"ll128"``, ``"simple"``, ``"ideal"``); default: the
        schedule's own, none for a schedule that names none (raw transfers).
    """

    name = "packet"

    def __init__(self, mtu: int | None = None, seed: int = 0, event_budget: int | None = None,
                 transport: str | None = None, config: PacketConfig | dict[str, Any] |
                 None = None, protocol: str | None = None, **options: Any) -> None:
        self.protocol = protocol
        # only what was set: an unset mtu stays the transport's default
        base: dict[str, Any] = (config.model_dump(exclude_unset=True)
                                if isinstance(config, PacketConfig) else dict(config or {}))
        base.update(options)
        if mtu is not None:
            base["mtu"] = mtu
        if event_budget is not None:
            base["event_budget"] = event_budget
        if transport is not None:
            base["transport"] = transport
        self.config = parse_packet_config(base)
        self.seed = int(self.config.seed if self.config.seed is not None else seed)

    def transport_for(self, fabric: Fabric) -> str:
        """The transport this backend simulates on ``fabric``."""
        t = self.config.transport or fabric.info.transport or "ib"
        if t not in MODES:
            raise ConfigError(f"fabric transport {t!r} has no packet model; set "
                              f"packet.transport to {MODE_NAMES}", field="packet.transport")
        return t

    def stuck_node(self, fabric: Fabric) -> int:
        """Node id of the configured stuck receiver (-1: none)."""
        sr = self.config.stuck_receiver
        if sr is None:
            return -1
        if sr.node is not None:
            names = {fabric.node_name(i): i for i in range(fabric.n_nodes)}
            if sr.node not in names:
                from fabricsim.errors import unknown

                raise unknown("node", sr.node, list(names)[:50],
                              field="packet.stuck_receiver.node")
            return names[sr.node]
        rank = sr.rank or 0
        if rank >= fabric.n_gpus:
            raise ConfigError(f"rank {rank} does not exist (fabric has {fabric.n_gpus})",
                              field="packet.stuck_receiver.rank")
        return int(fabric.gpus[rank])

    def run(self, schedule: Schedule, fabric: Fabric) -> Result:
        """Simulate ``schedule`` on ``fabric``; see :mod:`fabricsim.backends.packet.report`
        for what ``Result.extra`` holds."""
        from fabricsim.backends.packet.faults import fault_table, nopfc_mask, plan_packet_faults

        mode = self.transport_for(fabric)
        stuck = self.stuck_node(fabric)
        cfg = self.config if self.config.transport == mode else \
            self.config.for_transport(mode)   # the rules on one packet, with its real size
        check_endpoints(schedule, cfg.max_endpoints)
        plan = plan_packet_faults(fabric, cfg.faults, "packet.faults")
        fabric = plan.fabric
        ft = fault_table(plan.timed)
        nopfc = nopfc_mask(fabric, cfg.pfc.mismatch, [c.name for c in cfg.classes],
                           [c.lossless for c in cfg.classes])
        name = self.protocol or schedule.protocol
        proto = schedule_protocol(schedule, get_protocol(name)) \
            if name and name.lower() != "ideal" else None
        scale = 1
        for _attempt in range(4):
            st = build_state(schedule, fabric, cfg, mode=mode, seed=self.seed,
                             stuck_node=stuck, pool_scale=scale, protocol=proto,
                             link_faults=ft, nopfc=nopfc)
            t0 = _time.perf_counter()
            end = _run(st)
            wall = _time.perf_counter() - t0
            err = int(st.arrays["C"][L.C_ERR])
            if err in (L.ERR_HEAP, L.ERR_POOL):
                scale *= 4
                continue
            break
        else:  # pragma: no cover - needs a pathological run
            raise SimulationError("packet pool or event heap exhausted after resizing")
        if err == L.ERR_BUDGET:
            raise SimulationError(
                f"event budget of {cfg.event_budget:,} events exhausted at simulated "
                f"t={end * 1e6:.1f} us; raise packet.event_budget or shrink the run",
                field="packet.event_budget")
        if err == L.ERR_DEADLOCK:
            a = st.arrays
            npaused = int(a["C"][L.C_NPAUSED])
            raise SimulationError(
                f"deadlock at t={end * 1e6:.1f} us: no event left but "
                f"{int((a['SI'][:, L.S_DONE] == 0).sum())} step(s) unfinished with "
                f"{npaused} port queue(s) paused; enable the PFC watchdog "
                "(packet.pfc.watchdog.enabled) or set packet.until to see the state")
        from fabricsim.backends.packet.report import make_result

        status = {L.ERR_UNTIL: "until", L.ERR_PFC_DEADLOCK: "pfc_deadlock",
                  L.ERR_STALL: "stalled", L.ERR_RETRY: "retry_exceeded"}.get(err, "ok")
        res = make_result(st, fabric, end=end, wall=wall, mode=mode, status=status)
        more: dict[str, Any] = {"faults": plan.descriptions}
        if err == L.ERR_PFC_DEADLOCK:
            from fabricsim.backends.packet.deadlock import describe_deadlock

            more["deadlock"] = describe_deadlock(st, fabric, cfg, end)
        if err == L.ERR_RETRY:
            f = int(st.arrays["C"][L.C_RETRY_FLOW])
            more["retry_exceeded"] = {
                "t_s": end, "flow": f,
                "src": fabric.node_name(int(st.flow_src[f])),
                "dst": fabric.node_name(int(st.flow_dst[f])),
                "timeouts_in_a_row": int(st.arrays["FI"][f, L.F_NTO]),
                "reason": "the flow's retransmission timer expired more than retry_limit "
                          "times in a row without progress (an RDMA queue pair then goes "
                          "to error)" if mode != "uet" else
                          "the flow heard no ACK or NACK on any entropy for more than "
                          "retry_limit retransmission timeouts in a row (every path "
                          "failed)"}
        if err == L.ERR_STALL:
            down = np.flatnonzero(st.arrays["LI"][:, L.LI_DOWN] == 1)
            more["stalled"] = {
                "t_s": end, "window_s": cfg.pfc.deadlock_window,
                "links_down": [fabric.link_name(int(l)) for l in down],
                "reason": "nothing was sent on any link for a whole window while these "
                          "links were down: the credit-based ports in front of them wait "
                          "for the link to return (no rerouting is modelled)"}
        res = replace(res, extra={**res.extra, **more})
        floor = kernel_floor(schedule, proto)
        if floor > 0 and name:
            floor += stream_start(schedule, get_protocol(name), fabric)
        limited = "links"
        if floor > 0 and res.extra.get("complete", False):
            # the kernels' own rate bounds the run (Schedule.kernel_floor), after the launch
            t = max(res.time, floor + (proto.launch if proto else 0.0))
            limited = "kernels" if t > res.time else "links"
            res = replace(res, time=t)
        fill = pipeline_fill(schedule, proto, fabric)  # the chunk pipeline's fill
        cross = crossing_cost(schedule, proto)  # the proxy steps of its network crossings
        if fill + cross > 0 and res.extra.get("complete", False):
            res = replace(res, time=res.time + fill + cross)
        return replace(res, extra={**res.extra, "limited_by": limited,
                                   "pipeline_fill": fill, "crossings": cross})


def _run(st: State) -> float:
    from fabricsim.backends.packet.engine import run_engine

    a = st.arrays
    return float(run_engine(
        a["LI"], a["LF"], a["QI"], a["QF"], a["CL"], a["NDF"], a["PK"], a["free"], a["FI"],
        a["FF"], a["FPS"], a["FPL"], a["PL"], a["NB"], a["BM"], a["SI"], a["SF"], a["DP"],
        a["DI"], a["RF"], a["RT"], a["TS_Q"], a["TS_D"], a["TS_F"], a["TS_NP"], a["P"],
        a["IP"], a["HT"], a["HI"], a["C"], a["STUCK_L"], np.int64(st.stuck_node), a["SQ"],
        a["SPF"], a["FT"], a["RX"], True if a["IP"][L.I_UET] == 1 else None))
