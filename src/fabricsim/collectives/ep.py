"""Expert-parallel dispatch and combine, as the MoE kernel families run them.

An MoE layer sends each token to the ranks holding its ``top_k`` routed experts
(*dispatch*) and brings the experts' outputs back (*combine*, the reverse traffic, reduced
at the token's home). How many bytes cross which links depends on the kernel family, so
each family compiles to its own :class:`~fabricsim.schedule.Schedule`, timed by any
backend with the shared protocol model:

``nccl``
    All-to-all(v) through NCCL (Megatron's ``alltoall`` dispatcher, ``torch``
    ``all_to_all_single``): one copy per (token, expert) pair, posted as grouped
    send/recv, relayed over NVLink to the destination's rail as NCCL's PXN does.
``deepep``
    DeepEP's normal (high-throughput) kernels: a token crosses the network once per
    destination *server*, to the GPU on the sender's rail there, which forwards it over
    NVLink to each GPU of that server holding one of its experts; the network and NVLink
    legs run concurrently (chunked), the slower one sets the pace. Within one server only
    the NVLink leg exists.
``hybridep``
    NVIDIA's HybridEP: the same hierarchy (network once per server, NVLink fan-out) with
    TMA copies that hold fewer SMs.
``deepep-ll``
    DeepEP's low-latency kernels (IBGDA): a copy per (token, expert) pair written by the
    GPU straight to the expert's GPU, over its own NIC across servers (no forwarding,
    no rail relay) and over NVLink within one.
``nvlink-onesided``
    One-sided stores inside one NVLink domain (TensorRT-LLM's MNNVL all-to-all, NCCL's
    device API): a copy per (token, destination GPU), no network.

Routing (:class:`Routing`) decides the traffic matrix: uniform (the kernels' own
benchmarks), a Zipf skew over experts, or a measured expert-load histogram; ``node_limit``
restricts a token's experts to that many servers (DeepSeek-V3's node-limited routing,
as DeepEP's test picks them). Expected counts come from a seeded sample of tokens, so a
run is deterministic.

Bandwidth is reported in each family's own convention (:class:`EpResult`): DeepEP and
HybridEP count the bytes a rank sends to every server its tokens go to, its own included
(``bw_rdma``), and the bytes a rank receives (``bw_nvl``); the low-latency kernels and
NCCL count one copy per (token, expert) pair (``algbw``).

Each family pays a fixed cost per call beyond the schedule's own latency (kernel launch,
layout notification, receive-side copies): :data:`KERNEL_OVERHEAD_S`, one figure per
family fitted on its published sources where two or more measure it
(``benchmarks/accuracy_ep.py`` reports it leave-one-source-out).

Example
-------
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h800", 4)
>>> cfg = EpConfig(tokens=128, hidden=7168, top_k=8, experts=256)
>>> r = run_ep(fab, cfg, "dispatch", kernel="deepep-ll")
>>> r.kernel, r.ep, 100 < r.time_us < 300
('deepep-ll', 32, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from fabricsim.collectives.alltoall import nic_split, p2p_crossings, peer_round, pxn_relay
from fabricsim.collectives.registry import Group, step
from fabricsim.errors import ConfigError, unknown
from fabricsim.fabric import Fabric
from fabricsim.results import Tabular
from fabricsim.schedule.core import Crossings, Pipeline, Schedule, Step
from fabricsim.shipped import shipped_json

__all__ = ["EP_DTYPES", "EP_KERNELS", "EP_PHASES", "KERNEL_OVERHEAD_S", "EpConfig",
           "EpResult", "EpTraffic", "Routing", "build_ep_schedule", "default_ep_kernel",
           "ep_band", "ep_heldout", "ep_kernel", "route", "run_ep", "token_bytes"]

#: The kernel families, each with what it is.
EP_KERNELS: dict[str, str] = {
    "nccl": "NCCL all-to-all(v): a copy per (token, expert), PXN relay across rails",
    "deepep": "DeepEP normal kernels: network once per server, then NVLink fan-out",
    "hybridep": "NVIDIA HybridEP: network once per server, NVLink fan-out (TMA)",
    "deepep-ll": "DeepEP low-latency kernels: a copy per (token, expert), direct RDMA",
    "nvlink-onesided": "one-sided NVLink stores in one NVLink domain (TensorRT-LLM MNNVL)",
    "xla": "XLA's all-to-all on a TPU slice: a copy per (token, expert) over ICI",
}
#: Other names users give the families (Megatron's ``--moe-token-dispatcher-type``,
#: DeepEP's and TensorRT-LLM's own words).
_ALIASES = {"alltoall": "nccl", "all_to_all": "nccl", "a2a": "nccl", "torch": "nccl",
            "deepep_normal": "deepep", "deepep-normal": "deepep", "flex": "deepep",
            "normal": "deepep", "hybrid_ep": "hybridep", "hybrid-ep": "hybridep",
            "deepep_ll": "deepep-ll", "low_latency": "deepep-ll", "low-latency": "deepep-ll",
            "ll": "deepep-ll", "mnnvl": "nvlink-onesided", "trtllm": "nvlink-onesided",
            "onesided": "nvlink-onesided", "nvlink_onesided": "nvlink-onesided",
            "one-sided": "nvlink-onesided"}
EP_PHASES = ("dispatch", "combine")
#: Bytes per element of a token's hidden vector, and the scale bytes per element that
#: block-scaled formats add (FP8 with one FP32 scale per 128, as DeepEP casts it;
#: NVFP4 with one E4M3 scale per 16).
EP_DTYPES: dict[str, tuple[float, float]] = {"bf16": (2.0, 0.0), "fp16": (2.0, 0.0),
                                             "fp8": (1.0, 4.0 / 128), "fp4": (0.5, 1.0 / 16),
                                             "nvfp4": (0.5, 1.0 / 16)}
#: Fixed cost (s) of one kernel call beyond its schedule's latency: launch, the
#: layout/count notification before data moves and the receive side's copy out of the
#: communication buffer. Fitted on the published figures of every source of a family
#: (``benchmarks/accuracy_ep.py``, which reports them leave-one-source-out), and only for
#: a family two sources or more measure: DeepEP's normal kernels 156 µs (what its Torch
#: API adds around the kernels: layout notification, the CPU sync on the received counts,
#: the copy out; DeepEP's V1 and V2 READMEs and NVIDIA's HybridEP document), its
#: low-latency kernels 14.4 µs (DeepEP V1, NCCL EP, pplx-garden) and one-sided NVLink
#: 10.4 µs (TensorRT-LLM's blog and FlashInfer's benchmark of the same kernel). HybridEP
#: is measured by one source (NVIDIA's HybridEP document): it carries no fixed cost beyond
#: one exchange's latency, as its held-out figures are computed. NCCL's all-to-all is the
#: protocol model's own. ``tests/collectives/test_ep.py`` keeps these at the fit.
KERNEL_OVERHEAD_S: dict[str, float] = {"nccl": 0.0, "deepep": 156.4e-6, "hybridep": 0.0,
                                       "deepep-ll": 14.4e-6, "nvlink-onesided": 10.7e-6,
                                       "xla": 0.0}
#: Channels of DeepEP's normal kernels (two SMs each; its default 20 SMs) and the tokens
#: one channel moves per chunk (its configs use 6-36 per NVLink chunk, 6-20 per RDMA one).
DEEPEP_CHANNELS = 10
CHUNK_TOKENS = 16
#: Most tokens per rank DeepEP's low-latency kernels take (its buffers' bound).
LL_MAX_TOKENS = 256
#: Tokens sampled to estimate a routing's expected traffic.
SAMPLE_TOKENS = 8192


@cache
def ep_heldout() -> dict[str, Any]:
    """The shipped held-out table (``collectives/ep_heldout.json``, written by
    ``benchmarks/accuracy_ep.py --write``): per kernel family the leave-one-source-out
    error (``median``, ``p90``, ``worst``, ``rows``, ``sources``) and the systems its
    published figures cover."""
    return shipped_json("fabricsim.collectives", "ep_heldout.json")


def ep_band(kernel: str, system: str) -> tuple[dict[str, Any] | None, str]:
    """The held-out error of ``kernel``'s published figures, and a warning when
    ``system`` is not among the systems they cover ("" when it is).

    >>> band, warn = ep_band("deepep-ll", "dgx-h800")
    >>> band["rows"] > 10, warn
    (True, '')
    >>> ep_band("deepep-ll", "aws-p5")[1].startswith("no published")
    True
    """
    fam = ep_heldout()["families"].get(kernel)
    if fam is None:
        return None, (f"no published {kernel} figure is vendored: its times follow the "
                      f"model, unvalidated")
    if system not in fam["systems"]:
        return fam, (f"no published {kernel} figure on {system} (checked on "
                     f"{', '.join(fam['systems'])}): the band is extrapolated")
    return fam, ""


def ep_kernel(name: str, field_name: str = "--ep-kernel") -> str:
    """The family called ``name`` (aliases accepted).

    >>> ep_kernel("low_latency"), ep_kernel("alltoall")
    ('deepep-ll', 'nccl')
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in EP_KERNELS:
        raise unknown("EP kernel", name, list(EP_KERNELS), field=field_name)
    return key


def ep_kernel_on(fabric: Fabric, name: str) -> str:
    """The family ``name`` runs as on ``fabric``: :func:`ep_kernel`, with NCCL's
    all-to-all read as XLA's on a TPU slice (no NCCL there).

    >>> from fabricsim.fabric import build_cluster
    >>> ep_kernel_on(build_cluster("tpu-v5p", 1), "alltoall")
    'xla'
    """
    key = ep_kernel(name)
    return "xla" if key == "nccl" and fabric.info.ici_slice else key


def token_bytes(dtype: str, hidden: int, field_name: str = "--dtype") -> float:
    """Bytes of one token's hidden vector in ``dtype`` (scales included).

    >>> token_bytes("fp8", 7168), token_bytes("bf16", 7168)
    (7392.0, 14336.0)
    """
    key = dtype.lower()
    if key not in EP_DTYPES:
        raise unknown("EP dtype", dtype, list(EP_DTYPES), field=field_name)
    per, scale = EP_DTYPES[key]
    return hidden * (per + scale)


@dataclass(frozen=True)
class Routing:
    """How the router spreads tokens over experts.

    ``kind``: ``"uniform"`` (every expert alike, the kernels' own benchmarks),
    ``"zipf"`` (expert popularity ``1/i**skew`` over a seeded order of the experts) or
    ``"histogram"`` (``load``: a measured token count or share per expert).
    ``node_limit``: a token's experts lie on at most this many servers, chosen by the
    best expert score each holds (DeepSeek-V3's node-limited routing; ``None``: any).
    """

    kind: Literal["uniform", "zipf", "histogram"] = "uniform"
    skew: float = 0.0
    load: tuple[float, ...] = ()
    node_limit: int | None = None
    seed: int = 0

    def weights(self, experts: int) -> NDArray[np.float64]:
        """Relative popularity of each expert (sums to 1)."""
        if self.kind == "uniform":
            return np.full(experts, 1.0 / experts)
        if self.kind == "zipf":
            if not (math.isfinite(self.skew) and self.skew >= 0):
                raise ConfigError(f"a Zipf skew is an exponent >= 0, got {self.skew}",
                                  field="routing.skew")
            w = 1.0 / np.arange(1, experts + 1, dtype=np.float64) ** self.skew
            w = w[np.random.default_rng(self.seed).permutation(experts)]
            return np.asarray(w / w.sum(), dtype=np.float64)
        if self.kind == "histogram":
            h = np.asarray(self.load, dtype=np.float64)
            if h.size != experts:
                raise ConfigError(f"an expert-load histogram needs one figure per expert "
                                  f"({experts}), got {h.size}", field="routing.load")
            if not np.isfinite(h).all() or h.min() < 0 or h.sum() <= 0:
                raise ConfigError("an expert-load histogram is a distribution: figures "
                                  ">= 0, not all zero", field="routing.load")
            return np.asarray(h / h.sum(), dtype=np.float64)
        raise unknown("routing", self.kind, ["uniform", "zipf", "histogram"],
                      field="routing.kind")


@dataclass(frozen=True)
class EpConfig:
    """One MoE layer's dispatch/combine problem, in the words users know.

    ``tokens`` per rank (Megatron's micro-batch × sequence / TP·CP; DeepEP's
    ``num_tokens``), ``hidden`` size, ``top_k`` routed experts per token, ``experts`` in
    all (spread evenly over the EP ranks), the dtypes the two phases move (DeepSeek:
    FP8 dispatch, BF16 combine) and the :class:`Routing`.

    >>> EpConfig(tokens=4096, hidden=7168, top_k=8, experts=256).check(16)
    """

    tokens: int
    hidden: int
    top_k: int
    experts: int
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    routing: Routing = field(default_factory=Routing)
    #: Megatron's ``--moe-expert-capacity-factor``: an expert takes at most this many
    #: times its even share of a rank's tokens, the rest dropped (``None``: no cap).
    capacity_factor: float | None = None
    #: ``--moe-pad-expert-input-to-capacity``: every expert's input padded to capacity.
    pad_to_capacity: bool = False

    def check(self, ep: int) -> None:
        """Refuse a problem that cannot exist on ``ep`` ranks, naming the field."""
        for name, v in (("tokens", self.tokens), ("hidden", self.hidden),
                        ("top_k", self.top_k), ("experts", self.experts)):
            if v < 1:
                raise ConfigError(f"{name} must be >= 1, got {v}", field=f"--{name}")
        if self.top_k > self.experts:
            raise ConfigError(f"top-k {self.top_k} is more than the {self.experts} experts; "
                              f"give --top-k <= --experts", field="--top-k")
        if ep > self.experts:
            raise ConfigError(f"EP {ep} is more than the {self.experts} experts: every EP "
                              f"rank holds at least one; give --ep <= {self.experts}",
                              field="--ep")
        if self.experts % ep:
            raise ConfigError(f"{self.experts} experts do not spread evenly over EP {ep}; "
                              f"give an EP size that divides the experts", field="--ep")
        cf = self.capacity_factor
        if cf is not None and not (math.isfinite(cf) and cf > 0):
            raise ConfigError(f"a capacity factor is a number > 0, got {cf}",
                              field="--capacity-factor")
        if self.pad_to_capacity and cf is None:
            raise ConfigError("padding to capacity needs a capacity factor: give "
                              "--capacity-factor", field="--pad-to-capacity")
        lim = self.routing.node_limit
        if lim is not None and lim < 1:
            raise ConfigError(f"node limit must be >= 1, got {lim}", field="--node-limit")
        token_bytes(self.dispatch_dtype, self.hidden, "--dtype")
        token_bytes(self.combine_dtype, self.hidden, "--combine-dtype")
        self.routing.weights(self.experts)


@dataclass(frozen=True, eq=False)
class EpTraffic:
    """Expected per-token traffic of a routing on ``ep`` ranks spread over servers.

    ``copies[r]``: the token's experts on rank ``r`` (mean over tokens; sums to top-k, or
    to what a capacity factor keeps); ``rank_hit[r]``: chance the token goes to rank
    ``r`` at all (deduplicated per rank); ``server_hit[s]``: chance it goes to server
    ``s``.
    """

    copies: NDArray[np.float64]
    rank_hit: NDArray[np.float64]
    server_hit: NDArray[np.float64]
    #: Share of (token, expert) pairs the capacity factor drops.
    dropped: float = 0.0

    @property
    def imbalance(self) -> float:
        """The busiest rank's expert pairs over the mean (1: balanced)."""
        return float(self.copies.max() / self.copies.mean())


def route(cfg: EpConfig, server_of: NDArray[np.integer[Any]]) -> EpTraffic:
    """The expected traffic of ``cfg``'s routing over ranks on ``server_of`` (one entry
    per EP rank: its server). Rank ``j`` holds the ``j``-th block of experts.

    >>> t = route(EpConfig(tokens=1, hidden=1, top_k=8, experts=256), np.repeat([0, 1], 8))
    >>> round(float(t.copies.sum()), 6), round(float(t.server_hit.sum()), 2)
    (8.0, 1.99)
    """
    ep = int(server_of.shape[0])
    e, k = cfg.experts, cfg.top_k
    srv = np.unique(server_of, return_inverse=True)[1].ravel()
    n_srv = int(srv.max()) + 1
    rng = np.random.default_rng(cfg.routing.seed + 1)
    w = cfg.routing.weights(e)
    with np.errstate(divide="ignore"):
        keys = np.log(w)[None, :] + rng.gumbel(size=(SAMPLE_TOKENS, e))
    rank_of_expert = np.arange(e) // (e // ep)
    srv_of_expert = srv[rank_of_expert]
    lim = cfg.routing.node_limit
    if lim is not None and lim < n_srv:
        best = np.full((SAMPLE_TOKENS, n_srv), -np.inf)
        np.maximum.at(best.T, srv_of_expert, keys.T)
        keep = np.argpartition(-best, lim - 1, axis=1)[:, :lim]
        allowed = np.zeros((SAMPLE_TOKENS, n_srv), dtype=bool)
        np.put_along_axis(allowed, keep, True, axis=1)
        keys = np.where(allowed[:, srv_of_expert], keys, -np.inf)
        reachable = int(np.bincount(srv_of_expert).min()) * lim
        if k > reachable:
            raise ConfigError(f"top-k {k} experts do not fit on {lim} server(s) of "
                              f"{reachable // lim} experts each; raise --node-limit",
                              field="--node-limit")
    chosen = np.argpartition(-keys, k - 1, axis=1)[:, :k]
    pair_rank = rank_of_expert[chosen]
    copies = np.bincount(pair_rank.ravel(), minlength=ep).astype(np.float64) / SAMPLE_TOKENS
    hit = np.zeros((SAMPLE_TOKENS, ep), dtype=bool)
    np.put_along_axis(hit, pair_rank, True, axis=1)
    shit = np.zeros((SAMPLE_TOKENS, n_srv), dtype=bool)
    np.put_along_axis(shit, srv[pair_rank], True, axis=1)
    rank_hit, server_hit = hit.mean(axis=0), shit.mean(axis=0)
    dropped = 0.0
    cf = cfg.capacity_factor
    if cf is not None:  # each expert keeps at most cf x its even share (or is padded)
        load = np.bincount(chosen.ravel(), minlength=e) / SAMPLE_TOKENS
        cap = cf * k / e
        kept = np.full(e, cap) if cfg.pad_to_capacity else np.minimum(load, cap)
        dropped = float(max(load.sum() - np.minimum(load, cap).sum(), 0.0) / k)
        new = np.bincount(rank_of_expert, weights=kept, minlength=ep).astype(np.float64)
        scale = np.divide(new, copies, out=np.ones(ep), where=copies > 0)
        rank_hit = np.minimum(rank_hit * scale, 1.0) if not cfg.pad_to_capacity else \
            np.minimum(new, 1.0)
        sscale = np.bincount(srv, weights=new, minlength=n_srv) / np.maximum(
            np.bincount(srv, weights=copies, minlength=n_srv), 1e-30)
        server_hit = np.minimum(server_hit * sscale, 1.0)
        copies = new
    return EpTraffic(copies=copies, rank_hit=rank_hit,
                     server_hit=server_hit, dropped=dropped)


def default_ep_kernel(fabric: Fabric, tokens: int = 4096) -> str:
    """What Megatron and the serving engines pick on this cluster: NCCL's all-to-all
    without NVLink (the hierarchical kernels forward over it); else DeepEP, its
    low-latency kernels for decode-sized batches (at most :data:`LL_MAX_TOKENS` tokens per
    rank, as SGLang's ``auto`` mode switches) and its normal kernels otherwise (Megatron's
    ``flex`` dispatcher).

    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 2)
    >>> default_ep_kernel(fab), default_ep_kernel(fab, 128)
    ('deepep', 'deepep-ll')
    >>> default_ep_kernel(build_cluster("pcie-8gpu", 1))
    'nccl'
    """
    if fabric.info.ici_slice:
        return "xla"
    if not fabric.info.nvlink:
        return "nccl"
    return "deepep-ll" if tokens <= LL_MAX_TOKENS else "deepep"


def _pairs(group: Group, per_dst: NDArray[np.float64], combine: bool, *, same: bool | None,
           nic_split: int, label: str) -> list[Step]:
    """Transfers ``s → d`` (``d → s`` for a combine) of ``per_dst[d]`` bytes between every
    pair of distinct ranks, kept to pairs on the same server (``same=True``), on other
    servers (``False``) or all (``None``); split over ``nic_split`` NICs across servers."""
    n = group.n
    s_idx, d_idx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = s_idx != d_idx
    srv = group.server_of
    if same is not None:
        keep &= (srv[s_idx] == srv[d_idx]) == same
    s_idx, d_idx = s_idx[keep], d_idx[keep]
    nb = per_dst[d_idx]
    if combine:
        s_idx, d_idx = d_idx, s_idx
    src, dst = group.nodes[s_idx], group.nodes[d_idx]
    f = group.fabric
    k = nic_split if same is not True else 1
    if k == 1:
        return [step(f, src, dst, nb, label=label)]
    return [step(f, src, dst, nb / k, nic=j, label=f"{label} nic{j}") for j in range(k)]


def build_ep_schedule(fabric: Fabric, cfg: EpConfig, phase: str, kernel: str,
                      ranks: NDArray[np.int32] | None = None,
                      traffic: EpTraffic | None = None) -> Schedule:
    """Compile one dispatch or combine of ``kernel`` over ``ranks`` (default every GPU)
    to a Schedule (protocol ``simple``: the transport's payload efficiency and one
    exchange's latency).

    >>> from fabricsim.fabric import build_cluster
    >>> fab = build_cluster("dgx-h100", 2)
    >>> cfg = EpConfig(tokens=4096, hidden=7168, top_k=8, experts=256)
    >>> s = build_ep_schedule(fab, cfg, "dispatch", "deepep")
    >>> [st.label for st in s.steps]
    ['rdma nic0', 'nvlink']
    """
    if phase not in EP_PHASES:
        raise unknown("EP phase", phase, EP_PHASES, field="phase")
    kernel = ep_kernel_on(fabric, kernel)
    if bool(fabric.info.ici_slice) != (kernel == "xla"):
        raise ConfigError(
            f"{kernel} kernels run on NVIDIA GPUs; a TPU slice's experts exchange tokens by "
            f"XLA's all-to-all: use --ep-kernel xla" if fabric.info.ici_slice else
            f"XLA's all-to-all runs on TPU slices; {fabric.info.system} uses nccl, deepep, "
            f"hybridep, deepep-ll or nvlink-onesided", field="--ep-kernel")
    group = Group.of(fabric, ranks)
    n = group.n
    if n < 2:
        raise ConfigError("expert parallelism moves tokens between at least two ranks; "
                          "give --ep 2 or more", field="--ep")
    cfg.check(n)
    tr = traffic if traffic is not None else route(cfg, group.server_of)
    combine = phase == "combine"
    tb = token_bytes(cfg.combine_dtype if combine else cfg.dispatch_dtype, cfg.hidden,
                     "--combine-dtype" if combine else "--dtype")
    t = float(cfg.tokens)
    f = fabric
    steps: list[Step] = []
    cross: Crossings | None = None
    servers = group.servers
    if kernel == "nvlink-onesided":
        if servers > 1 or not f.info.nvlink:
            raise ConfigError(f"one-sided NVLink stores need every EP rank in one NVLink "
                              f"domain; these {n} ranks span {servers} of "
                              f"{f.info.nvlink_domain_gpus}-GPU domains: use --ep-kernel "
                              f"deepep or a larger NVLink domain (gb200-nvl72)",
                              field="--ep-kernel")
        steps = _pairs(group, t * tr.rank_hit * tb, combine, same=None, nic_split=1,
                       label="nvlink")
    elif kernel == "xla":  # every (token, expert) copy straight to its rank over ICI
        steps = _pairs(group, t * tr.copies * tb, combine, same=None, nic_split=1,
                       label="xla alltoall")
    elif kernel == "deepep-ll":
        k = nic_split(group)
        per = t * tr.copies * tb
        steps = _pairs(group, per, combine, same=True, nic_split=1, label="nvlink") + \
            _pairs(group, per, combine, same=False, nic_split=k, label="rdma")
    elif kernel == "nccl":
        k = nic_split(group)
        per = t * tr.copies * tb
        steps = peer_round(group)  # one round for all peers, then the proxy's posts
        if steps:
            cross = p2p_crossings(group, "alltoall",  # the busiest rank's peers
                                  share=float(np.max(per)) / (t * tb * cfg.top_k))
        deps = (0,) if steps else ()
        for st in _pairs(group, per, combine, same=None, nic_split=1, label="alltoall"):
            src, dst, nb = pxn_relay(group, st.src, st.dst, st.nbytes)
            steps += [step(f, src, dst, nb / k, deps=deps, nic=j, label=f"alltoall nic{j}")
                      for j in range(k)]
    else:  # deepep, hybridep: network once per server (to the sender's rail), then NVLink
        if servers > 1 and not group.per_server:
            raise ConfigError("hierarchical EP kernels need the same number of EP ranks on "
                              "every server", field="--ep")
        if servers > 1 and not f.info.nvlink:
            raise ConfigError(f"{kernel} forwards over NVLink inside the server and "
                              f"{f.info.system} has none; use --ep-kernel nccl",
                              field="--ep-kernel")
        if servers > 1:
            grid = group.grid()
            srv_ids = np.unique(group.server_of, return_inverse=True)[1].ravel()
            k = nic_split(group)
            s_idx, m_idx = np.meshgrid(np.arange(n), np.arange(servers), indexing="ij")
            own = srv_ids[s_idx] == m_idx
            s_idx, m_idx = s_idx[~own], m_idx[~own]
            col = np.empty(n, dtype=np.int64)
            col[grid.ravel()] = np.tile(np.arange(grid.shape[1]), grid.shape[0])
            d_idx = grid[m_idx, col[s_idx]]
            nb = t * tr.server_hit[m_idx] * tb
            if combine:
                s_idx, d_idx = d_idx, s_idx
            steps = [step(f, group.nodes[s_idx], group.nodes[d_idx], nb / k, nic=j,
                          label=f"rdma nic{j}") for j in range(k)]
        # NVLink leg: within a server, the forwarder for each of the server count's
        # sources (its own tokens and the ones arriving on its rail) delivers to each GPU
        steps += _pairs(group, servers * t * tr.rank_hit * tb, combine, same=True,
                        nic_split=1, label="nvlink")
    steps = [s for s in steps if s.n]
    return Schedule(steps=tuple(steps), collective=f"ep_{phase}", algorithm=kernel,
                    protocol="ideal" if kernel == "xla" else "simple",
                    nbytes=int(t * tb * cfg.top_k), ranks=group.ranks,
                    meta={"group_size": n, "servers": servers},
                    pipeline=_pipeline(group, kernel, tb), mnnvl=group.spans_hosts,
                    crossings=cross)


def _pipeline(group: Group, kernel: str, tb: float) -> Pipeline | None:
    """The kernel's own chunking (``None`` for NCCL, whose channel and chunk growth the
    protocol's ramp stands for). DeepEP's normal kernels and HybridEP move chunks of
    :data:`CHUNK_TOKENS` tokens per channel through the network stage then the NVLink
    stage (store and forward: the first chunk's fill); the direct kernels write each
    token where it goes, so nothing fills."""
    from fabricsim.collectives.pipeline import nvlink_rate

    if kernel in ("nccl", "xla"):
        return None
    f = group.fabric
    ops = DEEPEP_CHANNELS
    stages: list[tuple[str, float, float]] = []
    if kernel in ("deepep", "hybridep") and group.servers > 1:
        stages.append(("net", 1.0, f.info.nic_bandwidth * nic_split(group) / ops))
    nvl = nvlink_rate(group)
    if nvl > 0:
        stages.append(("nvlink", 1.0, nvl / ops))
    return Pipeline(stages=tuple(stages), ops=ops, chunk_bytes=CHUNK_TOKENS * tb)


@dataclass(frozen=True, eq=False)
class EpResult(Tabular):
    """One dispatch or combine: time, the family's bandwidth figures and the limit.

    ``algbw_gbps``: one copy per (token, expert) pair over the time (the low-latency
    kernels' and NCCL's convention); ``bw_rdma_gbps``: bytes a rank sends to every server
    its tokens reach, its own included, over the time (DeepEP/HybridEP "RDMA"; 0 on
    one server); ``bw_nvl_gbps``: bytes a rank receives, once per token, over the time
    (DeepEP/HybridEP "NVL"). ``headline_gbps`` is the figure the family's own benchmark
    prints first. ``limit`` names the link class that set the pace.
    """

    kernel: str
    phase: str
    ep: int
    servers: int
    time_us: float
    algbw_gbps: float
    bw_rdma_gbps: float
    bw_nvl_gbps: float
    headline_gbps: float
    headline: str
    limit: str
    imbalance: float
    overhead_us: float
    backend: str
    #: Share of (token, expert) pairs the capacity factor dropped.
    dropped: float = 0.0

    def _record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def as_dict(self) -> dict[str, Any]:
        return self._record()


def run_ep(fabric: Fabric, cfg: EpConfig, phase: str, kernel: str | None = None,
           ranks: NDArray[np.int32] | None = None, backend: Any = "analytic",
           overhead_s: dict[str, float] | None = None,
           traffic: EpTraffic | None = None) -> EpResult:
    """Time one ``phase`` of ``kernel`` (default :func:`default_ep_kernel`) on
    ``fabric`` over ``ranks`` (default every GPU): the schedule on ``backend`` plus the
    family's fixed cost (``overhead_s`` overrides :data:`KERNEL_OVERHEAD_S`).
    ``traffic``: the routing's :func:`route` on these ranks, when already known (a
    routing does not depend on the kernel or the phase)."""
    from fabricsim.backends import get_backend

    kern = (ep_kernel_on(fabric, kernel) if kernel is not None
            else default_ep_kernel(fabric, cfg.tokens))
    group = Group.of(fabric, ranks)
    cfg.check(group.n)
    tr = traffic if traffic is not None else route(cfg, group.server_of)
    sched = build_ep_schedule(fabric, cfg, phase, kern, group.ranks, tr)
    be = get_backend(backend) if isinstance(backend, str) else backend
    res = be.run(sched, fabric)
    over = (KERNEL_OVERHEAD_S if overhead_s is None else overhead_s).get(kern, 0.0)
    t = res.time + over
    combine = phase == "combine"
    tb = token_bytes(cfg.combine_dtype if combine else cfg.dispatch_dtype, cfg.hidden)
    tok = float(cfg.tokens)
    pairs = tok * cfg.top_k * tb
    rdma = tok * float(tr.server_hit.sum()) * tb if group.servers > 1 else 0.0
    nvl = group.n * tok * float(tr.rank_hit.mean()) * tb
    if kern in ("deepep", "hybridep"):
        head, name = (rdma, "rdma") if group.servers > 1 else (nvl, "nvl")
    else:
        head, name = pairs, "algbw"
    limit = fabric.link_label(res.bottleneck_link) if res.bottleneck_link >= 0 \
        else res.bottleneck_kind
    return EpResult(kernel=kern, phase=phase, ep=group.n, servers=group.servers,
                    time_us=t * 1e6, algbw_gbps=pairs / t / 1e9, bw_rdma_gbps=rdma / t / 1e9,
                    bw_nvl_gbps=nvl / t / 1e9, headline_gbps=head / t / 1e9, headline=name,
                    limit=limit or "none", imbalance=tr.imbalance, overhead_us=over * 1e6,
                    backend=res.backend, dropped=tr.dropped)
