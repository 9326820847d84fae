"""Turn a Schedule, a Fabric and a :class:`PacketConfig` into the engine's state arrays.

Example
-------
>>> import numpy as np
>>> from fabricsim.schedule import Schedule, Step
>>> from fabricsim.fabric import build_cluster
>>> from fabricsim.backends.packet.config import PacketConfig
>>> fab = build_cluster("dgx-h100", nodes=2)
>>> sch = Schedule(steps=(Step(src=fab.gpus[:1], dst=fab.gpus[8:9], nbytes=[1e5]),))
>>> st = build_state(sch, fab, PacketConfig(), mode="ib", seed=0)
>>> int(st.FI.shape[0]), st.packets_estimate
(1, 25)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.base import channel_share, ramp_bytes
from fabricsim.backends.packet import layout as L
from fabricsim.backends.packet.budget import EventEstimate, check_budget, events_lower_bound
from fabricsim.backends.packet.config import PacketConfig
from fabricsim.errors import ConfigError, SimulationError
from fabricsim.fabric.core import Fabric, pair_hash
from fabricsim.fabric.kinds import LinkKind, NodeKind
from fabricsim.fabric.paths import Paths
from fabricsim.protocols import Protocol, switch_endpoint, transfer_terms
from fabricsim.schedule.core import Schedule

MODES = {"ib": L.MODE_IB, "roce": L.MODE_ROCE, "tcp": L.MODE_TCP, "srd": L.MODE_SRD,
         "uet": L.MODE_UET, "slingshot": L.MODE_IB}
#: Transports whose links between switches run credit-based flow control: InfiniBand,
#: and Slingshot (link-level retry and credits between Rosetta switches), which the
#: engine runs as InfiniBand with Slingshot's MTU and framing.
CREDIT_MODES = tuple(t for t, m in MODES.items() if m == L.MODE_IB)
#: The transports as a sentence names them: "ib, roce, ... or slingshot".
MODE_NAMES = f"{', '.join(list(MODES)[:-1])} or {list(MODES)[-1]}"
INTRA_LINKS = (LinkKind.NVLINK, LinkKind.PCIE, LinkKind.CPU_INTERCONNECT,
               LinkKind.NVLINK_NETWORK, LinkKind.ICI)
ETH_SWITCHES = (NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE, NodeKind.ROUTER,
                NodeKind.STORAGE_SWITCH, NodeKind.MGMT_SWITCH)
MAX_BITMAP = 400_000_000
#: Retransmission timeouts in a row (no progress between) a flow survives by default:
#: 7 for RDMA, the largest ``retry_cnt`` of an InfiniBand/RoCE queue pair (then the QP
#: goes to error, ``IBV_WC_RETRY_EXC_ERR``), 15 for TCP (Linux ``tcp_retries2``); UET
#: (timeouts in a row with no ACK or NACK on any entropy: every path has failed) 7 as
#: RDMA, an assumption: htsim's UEC model retries forever and no count from the UE 1.0
#: specification is modelled; SRD's spray-only model has no limit. Slingshot as RDMA
#: (its NICs' retry handler has no published count).
RETRY_LIMIT = {"ib": 7, "roce": 7, "tcp": 15, "uet": 7, "slingshot": 7}
#: Default retransmission timeout by transport (s; 1 ms otherwise): SRD's, and UET's, the
#: 100 us minimum RTO of htsim's UEC model (``DEFAULT_UEC_RTO_MIN``).
DEFAULT_RTO = {"srd": 100e-6, "uet": 100e-6}
#: Largest per-packet sender state of SRD flows (bytes): 4 float64 per packet per
#: repetition (send time, state, path, serial) beside the receive bitmap.
MAX_SRD_STATE_BYTES = 4 * 2**30
SRD_BYTES_PER_PACKET = 8 * L.N_SQ


@dataclass
class State:
    """All arrays the engine reads and writes, plus what the report needs to read them."""

    arrays: dict[str, Any]
    FI: NDArray[np.int64]
    n_flows: int
    nprio: int
    watched: NDArray[np.int64]
    bin_dt: float
    packets_estimate: int
    events_estimate: float
    flow_src: NDArray[np.int32]
    flow_dst: NDArray[np.int32]
    flow_step: NDArray[np.int64]
    stuck_node: int = -1
    meta: dict[str, Any] = field(default_factory=dict)


def step_classes(schedule: Schedule, cfg: PacketConfig) -> list[int]:
    """Traffic class of each step: ``schedule.meta['step_classes']`` (names or indices),
    else class 0 (the RDMA class)."""
    raw = schedule.meta.get("step_classes")
    if raw is None:
        return [0] * len(schedule.steps)
    out = []
    for v in raw:
        out.append(int(v) if isinstance(v, int) else cfg.class_index(str(v)))
    if len(out) != len(schedule.steps) or min(out, default=0) < 0 or \
            max(out, default=0) >= len(cfg.classes):
        raise ConfigError("schedule.meta['step_classes'] needs one valid class per step",
                          field="packet.classes")
    return out


def build_state(schedule: Schedule, fabric: Fabric, cfg: PacketConfig, *, mode: str,
                seed: int, stuck_node: int = -1, pool_scale: int = 1,
                protocol: Protocol | None = None,
                link_faults: NDArray[np.float64] | None = None,
                nopfc: NDArray[np.int64] | None = None) -> State:
    """Arrays for :func:`~fabricsim.backends.packet.engine.run_engine`.

    With an NCCL ``protocol`` (the schedule's), each flow's sender is paced at the payload
    rate the protocol reaches on its idle path and every step repetition waits its hop
    overhead (:func:`~fabricsim.protocols.transfer_terms`, the charge the
    analytic and flow backends make too); the launch overhead delays the first steps.
    ``link_faults`` is the timed-fault table (:func:`~fabricsim.backends.packet.faults.
    fault_table`), ``nopfc`` the per-link mask of classes a misconfigured port does not
    pause (:func:`~fabricsim.backends.packet.faults.nopfc_mask`).
    """
    if mode not in MODES:
        raise ConfigError(f"unknown transport {mode!r}; use {MODE_NAMES}",
                          field="packet.transport")
    NP = len(cfg.classes)
    nl, nn = fabric.n_links, fabric.n_nodes
    mtu = cfg.mtu_for(mode)
    hdr = cfg.header_for(mode)
    wire = mtu + hdr
    roce = mode == "roce"
    uet = mode == "uet"
    ucfg = cfg.uet
    rccc = uet and ucfg.feature("cc") == "rccc"
    # ---------------------------------------------------------------- flows
    steps = schedule.steps
    classes = step_classes(schedule, cfg)
    src = np.concatenate([s.src for s in steps]) if steps else np.zeros(0, np.int32)
    dst = np.concatenate([s.dst for s in steps]) if steps else np.zeros(0, np.int32)
    nb = np.concatenate([s.nbytes for s in steps]) if steps else np.zeros(0)
    nf = int(src.shape[0])
    fstep = np.repeat(np.arange(len(steps)), [s.n for s in steps]).astype(np.int64)
    reps = np.array([s.repeat for s in steps], dtype=np.int64)
    spray = mode in ("srd", "uet")
    npath = (ucfg.entropies if uet else
             cfg.paths if (spray or cfg.adaptive_routing) else 1)
    base_h = np.concatenate([s.hashes if s.hashes is not None else pair_hash(s.src, s.dst)
                             for s in steps]) if steps else np.zeros(0, np.uint64)
    rows = []
    for k in range(npath):
        h = base_h if k == 0 else pair_hash(src, dst, seed=k + 1000 * (seed + 1))
        rows.append(fabric.route_many(src, dst, h))
    p0 = rows[0] if rows else None
    hops = p0.lengths() if p0 is not None else np.zeros(0, np.int64)
    est = _estimate(schedule, fabric, cfg, mode, p0, hops, nf)
    check_budget(est, cfg.event_budget)
    if (mode == "srd" and cfg.srd.congestion_control) or uet:
        check_srd_state(int(np.maximum(np.ceil(nb / mtu), 1).sum()))
    # NVLink flows stripe their packets round-robin over every equal-cost path (as a GPU
    # spreads NVLink traffic over all its links / NVSwitches); receivers take them in any
    # order
    nvk = np.array([int(LinkKind.NVLINK), int(LinkKind.NVLINK_NETWORK)])
    alts: dict[int, list[NDArray[np.int32]]] = {}
    if p0 is not None and nf:
        on_nv = np.isin(fabric.link_kind[p0.links], nvk)
        nv_rows = np.unique(p0.row_ids()[on_nv]) if on_nv.any() else np.zeros(0, np.int64)
        cache: dict[tuple[int, int], list[NDArray[np.int32]]] = {}
        for i in nv_rows.tolist():
            key = (int(src[i]), int(dst[i]))
            if key not in cache:
                cache[key] = fabric.ecmp_paths(key[0], key[1], limit=64)
            if len(cache[key]) > 1:
                alts[i] = cache[key]
    width = max([npath, *(len(v) for v in alts.values())])
    # flat path table: flow f, alternative k -> PL[FPS[f, k]: FPS[f, k] + FPL[f, k]]
    FPS = np.zeros((max(nf, 1), width), dtype=np.int64)
    FPL = np.zeros((max(nf, 1), width), dtype=np.int64)
    parts, off = [], 0
    for k, p in enumerate(rows):
        lens = p.lengths()
        FPS[:nf, k] = off + p.ptr[:-1]
        FPL[:nf, k] = lens
        parts.append(p.links.astype(np.int64))
        off += int(p.links.shape[0])
    for i, paths in alts.items():
        for k, path in enumerate(paths):
            FPS[i, k] = off
            FPL[i, k] = len(path)
            parts.append(np.asarray(path, dtype=np.int64))
            off += len(path)
    PL = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if PL.size == 0:
        PL = np.zeros(1, np.int64)
    bad = (hops == 0) & (src != dst)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise SimulationError(f"no path from {fabric.node_name(int(src[i]))} to "
                              f"{fabric.node_name(int(dst[i]))}")
    if spray:  # keep only alternatives that leave through the same first link
        first = PL[FPS[:nf, 0]] if nf else np.zeros(0, np.int64)
        striped = np.zeros(nf, dtype=bool)
        striped[list(alts)] = True
        for k in range(1, npath):
            diff = (PL[FPS[:nf, k]] != first) & (FPL[:nf, k] > 0) & ~striped
            FPS[:nf, k][diff] = FPS[:nf, 0][diff]
            FPL[:nf, k][diff] = FPL[:nf, 0][diff]
    cap = fabric.link_capacity.astype(np.float64)
    lat = fabric.link_latency.astype(np.float64)
    npkt = np.maximum(np.ceil(nb / mtu), 1).astype(np.int64)  # zero bytes: one packet
    FI = np.zeros((max(nf, 1), L.N_FI), dtype=np.int64)
    FF = np.zeros((max(nf, 1), L.N_FF), dtype=np.float64)
    FI[:nf, L.F_SRC] = src
    FI[:nf, L.F_DST] = dst
    FI[:nf, L.F_PRIO] = np.asarray(classes, dtype=np.int64)[fstep] if nf else 0
    FI[:nf, L.F_STEP] = fstep
    FI[:nf, L.F_NPATH] = npath
    FI[:nf, L.F_SPRAY] = 2 if spray else 0
    for i, paths in alts.items():
        FI[i, L.F_NPATH] = len(paths)
        FI[i, L.F_SPRAY] = 1
    FI[:, L.F_RTX] = -1
    FI[:, L.F_MAX_SENT] = -1
    FI[:, L.F_NAK_SENT] = -1
    FI[:, L.F_REP] = -1
    FI[:, L.F_DONE] = 1
    selective = spray or cfg.adaptive_routing or mode == "tcp"
    needs_bm = np.full(nf, selective) | (FI[:nf, L.F_SPRAY] != 0)
    if needs_bm.any():
        if int(npkt.sum()) > MAX_BITMAP:
            raise SimulationError(f"{int(npkt.sum()):,} packets per repetition exceed the "
                                  "receive-bitmap limit; raise packet.mtu or shrink the "
                                  "transfers")
        bm_off = np.zeros(nf, dtype=np.int64)
        if nf:
            np.cumsum(npkt[:-1], out=bm_off[1:])
        FI[:nf, L.F_BM] = np.where(needs_bm, bm_off, -1)
        BM = np.zeros(max(int(npkt.sum()), 1), dtype=np.int8)
    else:
        FI[:, L.F_BM] = -1
        BM = np.zeros(1, dtype=np.int8)
    srdcc = mode == "srd" and cfg.srd.congestion_control
    persend = srdcc or uet   # per-packet sender state and per-path (entropy) state
    SQ = np.zeros((int(npkt.sum()) if persend and nf else 1, L.N_SQ))
    SPF = np.zeros((max(nf, 1) if persend else 1, npath if persend else 1, L.N_SPF))
    if nf and p0 is not None:
        bott = _path_min(cap, PL, FPS[:nf, 0], FPL[:nf, 0])
        FF[:nf, L.FF_LINE] = bott
        FF[:nf, L.FF_RATE] = bott
        FF[:nf, L.FF_TARGET] = bott
        FF[:nf, L.FF_ALPHA] = 1.0
        FF[:nf, L.FF_LAST_CNP] = -1.0
        FF[:nf, L.FF_ALPHA_T] = -1.0
        FF[:nf, L.FF_LAST_DEC] = -1.0
        FF[:nf, L.FF_RET_LAT] = _path_sum(lat, PL, FPS[:nf, 0], FPL[:nf, 0])
        # transport headers on flows that leave their server (see PacketConfig)
        ext = ~np.isin(fabric.link_kind[p0.links], np.array([int(k) for k in INTRA_LINKS]))
        FF[:nf, L.FF_HDR] = np.where(np.bincount(p0.row_ids(), weights=ext, minlength=nf)
                                     > 0, hdr, 0)
        if mode == "tcp":
            FF[:nf, L.FF_CWND] = cfg.init_cwnd
            FF[:nf, L.FF_SSTHRESH] = 1e12
    if srdcc and nf:
        # per path: the unloaded RTT (store-and-forward, ACK back over path 0's latency)
        # and an initial window of the path's share of the bandwidth-delay product
        cap_ = fabric.link_capacity.astype(np.float64)
        ser = np.where(fabric.link_up, (mtu + FF[:nf, L.FF_HDR].max(initial=0.0)) / cap_,
                       np.inf)
        for k in range(npath):
            rtt = _path_sum(ser + fabric.link_latency, PL, FPS[:nf, k], FPL[:nf, k]) + \
                FF[:nf, L.FF_RET_LAT]
            bdp = FF[:nf, L.FF_LINE] * rtt / wire
            SPF[:nf, k, L.SP_INIT] = np.maximum(bdp / npath * cfg.srd.init_window, 1.0)
            SPF[:nf, k, L.SP_CWND] = SPF[:nf, k, L.SP_INIT]
            SPF[:nf, k, L.SP_SRTT] = rtt
            SPF[:nf, k, L.SP_BASE] = rtt
            SPF[:nf, k, L.SP_LDEC] = -1.0
    if uet and nf:
        _uet_flows(FF, SPF, PL, FPS, FPL, fabric, cfg, nf, npath, mtu, wire, rccc)
    hop_of_flow = np.zeros(nf)
    if protocol is not None and nf and p0 is not None:
        innet = switch_endpoint(fabric, src, dst)
        ramp_at = ramp_bytes(schedule, protocol)  # no ramp where the pipeline's fill is timed
        share = channel_share(schedule, protocol)
        rate, hop_of_flow = transfer_terms(fabric, protocol, p0, innet, ramp_at, share)
        for i, paths in alts.items():  # striped over every plane: the planes' rates add up
            alt = Paths.from_rows([np.asarray(p, dtype=np.int32) for p in paths])
            r_alt, _ = transfer_terms(fabric, protocol, alt, innet[[i] * len(paths)],
                                      ramp_at, share)
            rate[i] = float(r_alt.sum())
        FF[:nf, L.FF_PROTO] = np.where(np.isfinite(rate), rate, 0.0)
    # ---------------------------------------------------------------- links
    kind = fabric.link_kind
    intra = np.isin(kind, np.array([int(k) for k in INTRA_LINKS]))
    nkind = fabric.node_kind
    eth_sw = np.isin(nkind, np.array([int(k) for k in ETH_SWITCHES]))
    LI = np.zeros((nl, L.N_LI), dtype=np.int64)
    LF = np.zeros((nl, L.N_LF), dtype=np.float64)
    LI[:, L.LI_SRC] = fabric.link_src
    LI[:, L.LI_DST] = fabric.link_dst
    cbfc = uet and bool(ucfg.feature("cbfc"))
    LI[:, L.LI_CREDIT] = (intra | (mode in CREDIT_MODES) | cbfc).astype(np.int64)
    LI[:, L.LI_CBFC] = (~intra & cbfc).astype(np.int64)
    LI[:, L.LI_LLR] = (~intra & (uet and bool(ucfg.feature("llr")))).astype(np.int64)
    trim = uet and bool(ucfg.feature("trimming"))
    LI[:, L.LI_TRIM] = (eth_sw[fabric.link_src] & trim).astype(np.int64)
    LI[:, L.LI_LOSSY] = (~intra).astype(np.int64) if cfg.loss_rate > 0 else 0
    LI[:, L.LI_ECN] = (eth_sw[fabric.link_src] & (roce or uet)).astype(np.int64)
    LI[:, L.LI_WATCH] = -1
    LI[:, L.LI_TX_LOST] = -1
    LI[:, L.LI_TX_INL] = -1
    LF[:, L.LF_CAP] = np.where(fabric.link_up, cap, cap * 1e-9)
    LF[:, L.LF_CAP0] = LF[:, L.LF_CAP]
    if nopfc is not None:
        LI[:, L.LI_NOPFC] = nopfc
    FT = link_faults if link_faults is not None else np.zeros((0, L.N_FT))
    LF[:, L.LF_LAT] = lat
    # credits: enough for a round trip at line rate plus a few packets
    auto_credit = 2.0 * cap * lat * 1.25 + 4 * wire
    credit = np.full(nl, cfg.credit_bytes) if cfg.credit_bytes else auto_credit
    credit = np.maximum(credit, wire)
    QI = np.zeros((nl * NP, L.N_QI), dtype=np.int64)
    QF = np.zeros((nl * NP, L.N_QF), dtype=np.float64)
    QF[:, L.QF_CRED] = np.repeat(credit, NP)
    QF[:, L.QF_FIRST] = -1.0
    CL = np.zeros((NP, L.N_CL), dtype=np.int64)
    for i, c in enumerate(cfg.classes):
        CL[i, L.CL_LOSSLESS] = int(c.lossless and cfg.pfc.enabled and roce)
        CL[i, L.CL_ECN] = int(c.ecn and cfg.ecn.enabled and (roce or uet))
    NDF = np.zeros((nn, L.N_NF), dtype=np.float64)
    NDF[:, L.N_BUF] = np.where(eth_sw, cfg.switch_buffer, cfg.nic_buffer)
    RX = np.zeros(nn + 1, dtype=np.int64)   # RCCC: flows by receiver (pointers, then ids)
    if rccc and nf:
        order = np.argsort(dst, kind="stable")
        ptr = np.zeros(nn + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=nn), out=ptr[1:])
        RX = np.concatenate([ptr + nn + 1, order.astype(np.int64)])
        rate = np.zeros(nn)
        np.maximum.at(rate, dst, FF[:nf, L.FF_LINE])
        NDF[:, L.N_PULL_RATE] = np.maximum(rate * ucfg.rccc.rate_share, 1.0)
    # ---------------------------------------------------------------- steps
    ns = len(steps)
    SI = np.zeros((max(ns, 1), L.N_SI), dtype=np.int64)
    SF = np.zeros((max(ns, 1), L.N_SF), dtype=np.float64)
    counts = np.array([s.n for s in steps], dtype=np.int64)
    if ns:
        SI[:ns, L.S_FOFF] = np.concatenate([[0], np.cumsum(counts)[:-1]])
        SI[:ns, L.S_NF] = counts
        SI[:ns, L.S_REPEAT] = reps
        SI[:ns, L.S_REP] = -1
        SI[:ns, L.S_NDEP] = [len(set(s.deps)) for s in steps]
        SF[:ns, L.SF_DELAY] = [s.delay for s in steps]
        if protocol is not None:
            hop = np.zeros(ns)
            np.maximum.at(hop, fstep, hop_of_flow)
            SF[:ns, L.SF_HOP] = hop
            SF[:ns, L.SF_DELAY] += np.where(SI[:ns, L.S_NDEP] == 0, protocol.launch, 0.0)
    dependents: list[list[int]] = [[] for _ in range(ns)]
    for i, s in enumerate(steps):
        for d in set(s.deps):
            dependents[d].append(i)
    DP = np.zeros(ns + 1, dtype=np.int64)
    DP[1:] = np.cumsum([len(d) for d in dependents]) if ns else []
    DI = np.array([j for d in dependents for j in d] or [0], dtype=np.int64)
    # ---------------------------------------------------------------- estimates
    pkts, events_est = est.packets, est.events
    load = p0.link_load(nb * reps[fstep], nl) if p0 is not None and nf else np.zeros(nl)
    t_est = float((load / cap).max(initial=0.0)) + float(FF[:nf, L.FF_RET_LAT].max(
        initial=0.0)) * float(reps.max(initial=1)) * 2
    horizon = max(t_est * 2.0, 1e-6)
    if cfg.stuck_receiver is not None and stuck_node >= 0:
        horizon = max(horizon, cfg.stuck_receiver.end * 1.5 + t_est * 2)
    if FT.shape[0]:  # timed faults slow the run: stretch the bins by the worst up share
        flap = np.isfinite(FT[:, L.FT_PERIOD])
        share = FT[flap, L.FT_DUTY] + (1 - FT[flap, L.FT_DUTY]) * FT[flap, L.FT_FACTOR]
        horizon /= max(float(share.min(initial=1.0)), 0.1)
        horizon = max(horizon, float(FT[:, L.FT_START].max()) * 1.5)
    if cfg.until is not None:
        horizon = cfg.until
    nbins = cfg.bins
    bin_dt = horizon / nbins
    # watched links: the most loaded ones (static estimate) and the links into the stuck node
    util = load / cap
    order = np.argsort(-util, kind="stable")
    watched = [int(l) for l in order[:16] if util[l] > 0]
    if stuck_node >= 0:
        into = np.flatnonzero(fabric.link_dst == stuck_node)
        watched += [int(l) for l in into if int(l) not in watched]
    watched = watched[:32]
    for w, l in enumerate(watched):
        LI[l, L.LI_WATCH] = w
    # ---------------------------------------------------------------- parameters
    P = np.zeros(L.N_P)
    P[L.P_MTU] = mtu
    P[L.P_HDR] = hdr
    P[L.P_XOFF] = cfg.pfc.xoff
    P[L.P_XON] = cfg.pfc.xon if cfg.pfc.xon is not None else max(cfg.pfc.xoff - 2 * wire, 0)
    eth = ~intra
    auto_head = float((2 * cap[eth] * lat[eth]).max(initial=0.0)) + 3 * wire
    P[L.P_HEADROOM] = cfg.pfc.headroom if cfg.pfc.headroom is not None else auto_head
    P[L.P_LOSSY_Q] = cfg.lossy_queue
    P[L.P_KMIN] = cfg.ecn.kmin
    P[L.P_KMAX] = max(cfg.ecn.kmax, cfg.ecn.kmin + 1)
    P[L.P_PMAX] = cfg.ecn.pmax
    dc = cfg.dcqcn
    P[L.P_G] = dc.g
    line = float(FF[:nf, L.FF_LINE].max(initial=cap.max(initial=1.0)))
    P[L.P_RAI] = dc.rai if dc.rai is not None else line * 1e-3
    P[L.P_RHAI] = dc.rhai if dc.rhai is not None else line * 1e-2
    P[L.P_T_INC] = dc.timer
    P[L.P_T_ALPHA] = dc.alpha_timer
    P[L.P_BYTE_CNT] = dc.byte_counter
    P[L.P_CNP_INT] = dc.cnp_interval
    P[L.P_MIN_RATE] = dc.min_rate
    P[L.P_DEC_PERIOD] = dc.rate_reduce_period
    P[L.P_FR_STEPS] = dc.fast_recovery_steps
    P[L.P_CLAMP] = {"never": 0.0, "after_timer": 1.0, "always": 2.0}[dc.clamp_target]
    P[L.P_LOSS] = cfg.loss_rate
    rto = cfg.rto if cfg.rto is not None else DEFAULT_RTO.get(mode, 1e-3)
    P[L.P_RTO] = rto
    # base round trip of each flow's path: propagation both ways (FF_RET_LAT is one way)
    # plus one packet's serialization per hop
    serial = _path_sum(np.where(cap > 0, wire / np.maximum(cap, 1.0), 0.0), PL,
                       FPS[:nf, 0], FPL[:nf, 0])
    base_rtt = float((2.0 * FF[:nf, L.FF_RET_LAT] + serial).max(initial=0.0))
    warnings = fabric_warnings(cfg, roce=roce, auto_headroom=auto_head, base_rtt=base_rtt,
                               lossless=bool(CL[:, L.CL_LOSSLESS].any()))
    P[L.P_WD_TIME] = cfg.pfc.watchdog.detect
    P[L.P_WD_RESTORE] = cfg.pfc.watchdog.restore
    if cfg.stuck_receiver is not None:
        P[L.P_STUCK_T0] = cfg.stuck_receiver.start
        P[L.P_STUCK_T1] = cfg.stuck_receiver.end
    P[L.P_UNTIL] = cfg.until if cfg.until is not None else np.inf
    P[L.P_BIN_DT] = bin_dt
    P[L.P_WINDOW] = cfg.window
    P[L.P_CUT_HDR] = 64.0
    P[L.P_SRD_TARGET] = cfg.srd.target_delay
    P[L.P_SRD_AI] = cfg.srd.ai
    P[L.P_SRD_BETA] = cfg.srd.beta
    P[L.P_SRD_MDF] = cfg.srd.max_decrease
    P[L.P_SRD_MINCW] = cfg.srd.min_cwnd
    P[L.P_TRIM] = ucfg.trim_threshold_bytes
    P[L.P_TRIM_SIZE] = min(hdr, wire) if hdr > 0 else 64.0
    P[L.P_NSCC_GAMMA] = ucfg.nscc.gamma
    P[L.P_NSCC_MAXMD] = ucfg.nscc.max_decrease
    P[L.P_NSCC_FI] = ucfg.nscc.fair_increase_mtus * wire
    P[L.P_NSCC_QA] = ucfg.nscc.quick_adapt_factor
    dlw = cfg.pfc.deadlock_window
    if dlw is not None and roce and cfg.pfc.enabled and cfg.pfc.watchdog.enabled:
        dlw = max(dlw, cfg.pfc.watchdog.detect)   # a watchdog that is on acts first
    P[L.P_DL_WINDOW] = dlw if dlw is not None else np.inf
    IP = np.zeros(L.N_I, dtype=np.int64)
    IP[L.I_NP] = NP
    IP[L.I_MODE] = MODES[mode]
    IP[L.I_DCQCN] = int(roce and dc.enabled and cfg.ecn.enabled)
    IP[L.I_WD] = int(roce and cfg.pfc.enabled and cfg.pfc.watchdog.enabled)
    IP[L.I_CUT] = int(cfg.switching == "cut-through")
    IP[L.I_ADAPTIVE] = int(cfg.adaptive_routing and not spray)
    IP[L.I_SPRAY] = int(spray)
    IP[L.I_SELECTIVE] = int(selective)
    IP[L.I_TCP] = int(mode == "tcp")
    IP[L.I_ACK_EVERY] = cfg.ack_every
    IP[L.I_BUDGET] = cfg.event_budget
    IP[L.I_SEED] = seed
    IP[L.I_NWATCH] = len(watched)
    IP[L.I_NFLOW_TS] = min(nf, 64)
    IP[L.I_NBINS] = nbins
    IP[L.I_SRDCC] = int(srdcc)
    IP[L.I_DL] = int(dlw is not None)
    IP[L.I_UET] = int(uet)
    IP[L.I_TRIM] = int(trim)
    IP[L.I_RCCC] = int(rccc)
    IP[L.I_REPS] = int(uet and ucfg.load_balance == "reps")
    IP[L.I_RETRY] = (cfg.retry_limit if cfg.retry_limit is not None else
                     RETRY_LIMIT.get(mode, 1 << 40))
    # ---------------------------------------------------------------- pools
    in_flight = int((cap * lat / (wire / 2)).sum()) + 2 * nl
    pool = (2 * nf + in_flight + 4 * nl * NP + 65536) * pool_scale
    PK = np.zeros((pool, L.N_PK), dtype=np.int64)
    free = np.arange(pool - 1, -1, -1, dtype=np.int64)
    heap_cap = (2 * pool + 8 * max(nf, 1) + 4 * nl * NP + 4 * ns + 2 * len(FT) + 1024)
    C = np.zeros(L.N_C, dtype=np.int64)
    C[L.C_FREE] = pool
    nrec = int(min((counts * reps).sum() if ns else 0, 2_000_000))
    stuck_links = (np.flatnonzero(fabric.link_dst == stuck_node).astype(np.int64)
                   if stuck_node >= 0 else np.zeros(0, np.int64))
    arrays: dict[str, Any] = dict(
        LI=LI, LF=LF, QI=QI, QF=QF, CL=CL, NDF=NDF, PK=PK, free=free, FI=FI, FF=FF, FPS=FPS,
        FPL=FPL, PL=PL, NB=np.concatenate([nb, [0.0]]), BM=BM, SI=SI, SF=SF, DP=DP, DI=DI,
        RF=np.zeros((max(nrec, 1), 2), dtype=np.int64),
        RT=np.zeros((max(nrec, 1), 2), dtype=np.float64),
        TS_Q=np.zeros((nbins, max(len(watched), 1))),
        TS_D=np.zeros(nbins), TS_F=np.zeros((nbins, max(min(nf, 64), 1))),
        TS_NP=np.zeros(nbins), P=P, IP=IP,
        HT=np.zeros(heap_cap), HI=np.zeros((heap_cap, 4), dtype=np.int64), C=C,
        STUCK_L=stuck_links, SQ=SQ, SPF=SPF, FT=FT, RX=RX,
    )
    return State(arrays=arrays, FI=FI, n_flows=nf, nprio=NP,
                 watched=np.asarray(watched, dtype=np.int64), bin_dt=bin_dt,
                 packets_estimate=pkts, events_estimate=events_est, flow_src=src,
                 flow_dst=dst, flow_step=fstep, stuck_node=stuck_node,
                 meta={"header_bytes": hdr, "hops": hops, "npath": npath, "credit": credit,
                       "headroom": float(P[L.P_HEADROOM]), "rto": rto,
                       "warnings": warnings})


def fabric_warnings(cfg: PacketConfig, *, roce: bool, auto_headroom: float,
                    base_rtt: float, lossless: bool) -> list[str]:
    """Settings that validate on their own but do not suit this fabric: a PFC headroom
    below what is in flight on its longest Ethernet link when a pause is sent (2 x
    bandwidth x delay plus 3 packets: lossless queues will drop), and a retransmission
    timeout below its longest path's base round trip (propagation both ways plus one
    packet's serialization per hop): the timer fires before any ACK can return.

    >>> from fabricsim.backends.packet.config import PacketConfig
    >>> c = PacketConfig.model_validate({"pfc": {"headroom": "8KB"}, "rto": "1us"})
    >>> for w in fabric_warnings(c, roce=True, auto_headroom=30e3, base_rtt=4e-6,
    ...                          lossless=True):
    ...     print(w.split(":")[0])
    packet.pfc.headroom
    packet.rto
    """
    out = []
    if roce and lossless and cfg.pfc.headroom is not None \
            and cfg.pfc.headroom < auto_headroom:
        out.append(f"packet.pfc.headroom: {cfg.pfc.headroom:,.0f} B is below the "
                   f"{auto_headroom:,.0f} B this fabric has in flight when a pause goes "
                   f"out (2 x bandwidth x delay of its longest Ethernet link plus 3 "
                   f"packets): lossless queues will overflow and drop; leave headroom "
                   f"unset (that value) or raise it")
    if cfg.rto is not None and base_rtt > 0 and cfg.rto < base_rtt:
        out.append(f"packet.rto: {cfg.rto * 1e6:,.3g} us is below the longest path's "
                   f"base round trip of {base_rtt * 1e6:,.3g} us: the timer fires before "
                   f"an ACK can return (spurious timeouts and retransmissions); raise it "
                   f"above the round trip")
    return out


def check_srd_state(packets: int) -> None:
    """Refuse an SRD run whose per-packet sender state would exceed
    :data:`MAX_SRD_STATE_BYTES` (raised before anything is allocated).

    >>> check_srd_state(1000)
    >>> check_srd_state(10**9)
    Traceback (most recent call last):
    ...
    fabricsim.errors.SimulationError: packet.mtu: SRD keeps 32 B of sender state per ...
    """
    need = packets * SRD_BYTES_PER_PACKET
    if need > MAX_SRD_STATE_BYTES:
        raise SimulationError(
            f"SRD keeps {SRD_BYTES_PER_PACKET} B of sender state per packet of a "
            f"repetition: {packets:,} packets need {need / 2**30:,.1f} GiB, beyond the "
            f"limit of {MAX_SRD_STATE_BYTES / 2**30:g} GiB; raise packet.mtu, shrink the "
            "transfers or use the flow backend", field="packet.mtu")


def _estimate(schedule: Schedule, fabric: Fabric, cfg: PacketConfig, mode: str, p0: Any,
              hops: NDArray[np.int64], nf: int) -> EventEstimate:
    credit_hops = np.zeros(nf, dtype=np.int64)
    if p0 is not None and nf:
        kind = fabric.link_kind[p0.links]
        credit = np.isin(kind, np.array([int(k) for k in INTRA_LINKS])) | (
            mode in CREDIT_MODES)
        credit_hops = np.bincount(p0.row_ids(), weights=credit, minlength=nf).astype(np.int64)
    per_packet_acks = mode in ("tcp", "uet") or (mode == "srd" and cfg.srd.congestion_control)
    return events_lower_bound(schedule, hops, credit_hops, mtu=cfg.mtu_for(mode),
                              ack_every=cfg.ack_every, tcp=per_packet_acks)


def _uet_flows(FF: NDArray[np.float64], SPF: NDArray[np.float64], PL: NDArray[np.int64],
               FPS: NDArray[np.int64], FPL: NDArray[np.int64], fabric: Fabric,
               cfg: PacketConfig, nf: int, npath: int, mtu: int, wire: int,
               rccc: bool) -> None:
    """UET sender state: base RTT (the fastest entropy's unloaded round trip), NSCC target
    delay and windows, RCCC speculative credit (in bandwidth-delay products)."""
    cap = fabric.link_capacity.astype(np.float64)
    hdr = FF[:nf, L.FF_HDR]
    ser = np.where(fabric.link_up, (mtu + hdr.max(initial=0.0)) / cap, np.inf)
    rtts = np.stack([_path_sum(ser + fabric.link_latency, PL, FPS[:nf, k], FPL[:nf, k])
                     for k in range(npath)]) + FF[:nf, L.FF_RET_LAT]
    brtt = rtts.min(axis=0)
    bdp = FF[:nf, L.FF_LINE] * brtt
    n = cfg.uet.nscc
    FF[:nf, L.FF_BRTT] = brtt
    FF[:nf, L.FF_TGT] = n.target_delay_s if n.target_delay_s is not None else 0.5 * brtt
    FF[:nf, L.FF_MAXW] = np.maximum(n.max_window_bdp * bdp, wire)
    FF[:nf, L.FF_CWND] = (np.full(nf, 1e300) if rccc else
                          np.minimum(np.maximum(n.init_window_bdp * bdp, wire),
                                     FF[:nf, L.FF_MAXW]))
    FF[:nf, L.FF_CRED0] = np.maximum(cfg.uet.rccc.init_credit_bdp * bdp, wire)
    SPF[:nf, :npath, L.SP_CWND] = 1.0   # every entropy usable


def _path_min(vals: NDArray[np.float64], PL: NDArray[np.int64], start: NDArray[np.int64],
              length: NDArray[np.int64]) -> NDArray[np.float64]:
    out = np.full(start.shape[0], np.inf)
    for h in range(int(length.max(initial=0))):
        ok = length > h
        out[ok] = np.minimum(out[ok], vals[PL[start[ok] + h]])
    return np.where(np.isfinite(out), out, 1.0)


def _path_sum(vals: NDArray[np.float64], PL: NDArray[np.int64], start: NDArray[np.int64],
              length: NDArray[np.int64]) -> NDArray[np.float64]:
    out = np.zeros(start.shape[0])
    for h in range(int(length.max(initial=0))):
        ok = length > h
        out[ok] += vals[PL[start[ok] + h]]
    return out
