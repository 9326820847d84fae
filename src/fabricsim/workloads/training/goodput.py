"""Goodput of a training job: the share of wall-clock time that trains when parts fail.

A synchronous data/tensor/pipeline-parallel job stops when any one of its parts fails:
a GPU, a NIC, a cable or transceiver, a switch, a host, or the software (a crash or an
NCCL hang). It then restarts from its last checkpoint. Three things cost wall-clock time:
writing checkpoints, the work done since the last checkpoint (lost at each failure), and
the restart itself (detect, reschedule, reload). The model is first order (Young 1974,
Daly 2006), with failures independent and exponentially distributed:

* job failure rate ``λ = Σ_c rate_c × units_c`` over the component classes
  ``gpu, nic, link, switch, host, software`` (failures per hour); job MTBF ``M = 1/λ``;
* checkpoint write time ``w = checkpoint_bytes / checkpoint_write_bytes_per_s``; the part
  of it that stalls training ``b = checkpoint_blocking_fraction × w`` (1 = synchronous);
* checkpoint interval ``τ`` (training time between checkpoints): given, or the Young/Daly
  optimum ``√(2·b·M)``, rounded to whole steps, at least one step, and at least ``w − b``
  (an asynchronous write must end before the next begins);
* lost fraction of wall time = ``b/τ`` (checkpoint writes) + ``(τ/2 + w − b)/M`` (lost
  work: half an interval on average, plus the background write not yet durable) +
  ``R/M`` (restarts); ``goodput = 1 − lost``; ``$ lost/day = gpus × 24 × price × lost``.

The default per-unit failure rates (:class:`FailureRates`) are derived from the 419
unexpected interruptions of Meta's 54-day Llama 3 405B pre-training run on 16,384 H100 GPUs
(Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 5), divided by
the unit counts of that cluster; docs/goodput.md lists every figure and assumption.

Example
-------
>>> r = goodput(16_384, switches=1_280, links=49_152, step_time_s=6.0,
...             checkpoint_bytes=checkpoint_size_bytes(405e9),
...             checkpoint_write_bytes_per_s=2e12)
>>> round(r.failures_per_day, 2), round(r.job_mtbf_hours, 2), r.checkpoint_interval_s
(7.76, 3.09, 252.0)
>>> round(r.goodput, 3), round(r.lost_restart, 3)
(0.924, 0.054)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from fabricsim.errors import ConfigError, ModelError, unknown
from fabricsim.results import Tabular

if TYPE_CHECKING:
    from fabricsim.fabric import Fabric

__all__ = [
    "CHECKPOINT_BYTES_PER_PARAM",
    "COMPONENT_CLASSES",
    "DEFAULT_GPU_HOUR_USD",
    "DEFAULT_RESTART_S",
    "LLAMA3_DAYS",
    "LLAMA3_GPUS",
    "LLAMA3_INTERRUPTIONS",
    "LLAMA3_LINKS",
    "LLAMA3_NICS",
    "LLAMA3_SERVERS",
    "LLAMA3_SWITCHES",
    "STORAGE_WRITE_CAP",
    "SWITCH_SURVIVAL_3_MONTHS",
    "FailureRates",
    "GoodputInputs",
    "GoodputResult",
    "checkpoint_size_bytes",
    "goodput",
    "goodput_on_fabric",
    "storage_write_bytes_per_s",
    "young_daly_interval_s",
]

#: Component classes, in the order results list them. ``software`` is counted per GPU (one
#: rank = one process that can crash or hang).
COMPONENT_CLASSES = ("gpu", "nic", "link", "switch", "host", "software")

# --- Source data ---------------------------------------------------------------------------
# Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783), section 3.3.4 and
# Table 5: 419 unexpected interruptions in a 54-day snapshot of Llama 3 405B pre-training
# on up to 16,384 H100 GPUs (Grand Teton servers of 8 GPUs, one 400G NIC per GPU).
# (root cause as in Table 5, our component class, count). The counts sum to 419. The
# paper prints 30.1 % beside "Faulty GPU 148"; 148/419 is 35.3 %, and the other rows'
# percentages match their counts, so the counts are used.
#: Table 5 of the Llama 3 paper: (root cause, component class here, interruptions).
LLAMA3_INTERRUPTIONS: tuple[tuple[str, str, int], ...] = (
    ("Faulty GPU", "gpu", 148),
    ("GPU HBM3 Memory", "gpu", 72),
    ("Software Bug", "software", 54),
    ("Network Switch/Cable", "network", 35),  # split into switch and link below
    ("Host Maintenance", "host", 32),  # unplanned maintenance of a host
    ("GPU SRAM Memory", "gpu", 19),
    ("GPU System Processor", "gpu", 17),
    ("NIC", "nic", 7),
    ("NCCL Watchdog Timeouts", "software", 7),  # hangs of unknown cause
    ("Silent Data Corruption", "gpu", 6),
    ("GPU Thermal Interface + Sensor", "gpu", 6),
    ("SSD", "host", 3),
    ("Power Supply", "host", 3),
    ("Server Chassis", "host", 2),
    ("IO Expansion Board", "host", 2),
    ("Dependency", "software", 2),
    ("CPU", "host", 2),
    ("System Memory", "host", 2),
)
#: Length of the Llama 3 snapshot (days) and its GPUs (Llama 3 paper, section 3.3.4).
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
#: 16,384 GPUs / 8 per Grand Teton server (Llama 3 paper, section 3.3.1).
LLAMA3_SERVERS = 2_048
#: One 400 Gb/s RoCE NIC per GPU: 8 per server (Llama 3 paper, section 3.3.1).
LLAMA3_NICS = 16_384
# ASSUMPTION (not published): the fabric counted as a full-bisection, rail-optimized 3-tier
# fat-tree of radix-64, 400G switches over 16,384 NIC ports: 512 leaves (32 down, 32 up),
# 512 spines in 16 pods of 32, 256 core switches; one link per NIC-leaf, leaf-spine and
# spine-core port pair (16,384 each). fabricsim's own builder gives the same counts
# (build_cluster("dgx-h100", 2048, fabric="roce-400g", topology="rail-optimized")). Meta's
# real cluster oversubscribes its top layer 1:7 and so has fewer core ports.
#: Switches of the assumed 16,384-GPU fat-tree (512 leaf + 512 spine + 256 core).
LLAMA3_SWITCHES = 1_280
#: Links (cables with their two transceivers) of the assumed fat-tree: 3 × 16,384.
LLAMA3_LINKS = 49_152
#: Singh et al. 2021, "Surviving switch failures in cloud datacenters", ACM SIGCOMM CCR
#: 51(2): 98 % of 180,000 datacenter switches ran 3 months without failing. Used only to
#: split Llama 3's 35 "Network Switch/Cable" interruptions between switches and links.
SWITCH_SURVIVAL_3_MONTHS = 0.98

_SNAPSHOT_H = LLAMA3_DAYS * 24.0
_THREE_MONTHS_H = 365.25 / 4.0 * 24.0


def _llama3_count(cls: str) -> int:
    return sum(n for _, c, n in LLAMA3_INTERRUPTIONS if c == cls)


# Per-unit failure rates (failures per unit-hour) = count / (units × 1,296 h).
# GPU: 268 (faulty GPU, HBM3, SRAM, system processor, SDC, thermal) / 16,384 GPUs.
_GPU_RATE = _llama3_count("gpu") / (LLAMA3_GPUS * _SNAPSHOT_H)
# NIC: 7 / 16,384 NICs.
_NIC_RATE = _llama3_count("nic") / (LLAMA3_NICS * _SNAPSHOT_H)
# Host: 46 (maintenance 32, SSD, PSU, chassis, IO board, CPU, memory) / 2,048 servers.
_HOST_RATE = _llama3_count("host") / (LLAMA3_SERVERS * _SNAPSHOT_H)
# Software: 63 (bugs 54, NCCL watchdog 7, dependency 2) / 16,384 GPUs (ranks).
_SOFTWARE_RATE = _llama3_count("software") / (LLAMA3_GPUS * _SNAPSHOT_H)
# Switch: -ln(0.98) per 3 months (Singh et al. 2021), ~1.08e5 h MTBF; 1,280 switches give
# 15.3 of Llama 3's 35 network interruptions in 54 days.
_SWITCH_RATE = -math.log(SWITCH_SURVIVAL_3_MONTHS) / _THREE_MONTHS_H
# Link/cable/transceiver: the remaining 19.7 of the 35, over 49,152 links.
_LINK_RATE = ((_llama3_count("network") - _SWITCH_RATE * LLAMA3_SWITCHES * _SNAPSHOT_H)
              / (LLAMA3_LINKS * _SNAPSHOT_H))

#: Restart time (s): ASSUMPTION, 10 minutes to detect the failure, reschedule onto healthy
#: servers, initialise NCCL and reload the checkpoint. Not a published measurement.
DEFAULT_RESTART_S = 600.0
#: Checkpoint bytes per parameter: BF16 weights (2) + FP32 master weights (4) + Adam's two
#: FP32 moments (8) = 14. Gradients are not saved (16 B/param is the training-memory figure).
CHECKPOINT_BYTES_PER_PARAM = 14.0
#: Price of a GPU-hour (USD): the catalog's rental estimate for a DGX H100 GPU.
DEFAULT_GPU_HOUR_USD = 2.5


# --- Validation ----------------------------------------------------------------------------

def _int_at_least(value: object, name: str, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"must be a whole number >= {minimum}, got {value!r}; {fix}",
                          field=name)
    if int(value) < minimum:
        raise ConfigError(f"must be >= {minimum}, got {int(value)}; {fix}", field=name)
    return int(value)


def _number(value: object, name: str, fix: str, *, positive: bool) -> float:
    what = "a positive" if positive else "a non-negative"
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value))
            or (float(value) <= 0 if positive else float(value) < 0)):
        raise ConfigError(f"must be {what}, finite number, got {value!r}; {fix}", field=name)
    return float(value)


# --- Rates ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class FailureRates:
    """Job-stopping failures per unit-hour of each component class.

    Units: ``gpu`` per GPU (with its HBM, SRAM, system processor), ``nic`` per NIC, ``link``
    per scale-out link (cable and its transceivers), ``switch`` per switch, ``host`` per
    server (CPU, memory, PSU, SSD, chassis, unplanned maintenance), ``software`` per GPU
    (a rank: bugs, NCCL hangs). Defaults: Llama 3 Table 5 over the units of its cluster
    (module docstring and docs/goodput.md). Rates must be finite and >= 0.

    Examples
    --------
    >>> r = FailureRates()
    >>> round(r.mtbf_hours()["gpu"]), round(r.mtbf_hours()["host"])
    (79230, 57700)
    >>> FailureRates.from_mtbf_hours(gpu=50_000).gpu
    2e-05
    >>> FailureRates(nic=-1.0)
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: rates.nic: must be a non-negative, finite number, got -1.0; \
give failures per unit-hour (0 = never fails)
    """

    gpu: float = _GPU_RATE
    nic: float = _NIC_RATE
    link: float = _LINK_RATE
    switch: float = _SWITCH_RATE
    host: float = _HOST_RATE
    software: float = _SOFTWARE_RATE

    def __post_init__(self) -> None:
        for f in fields(self):
            _number(getattr(self, f.name), f"rates.{f.name}",
                    "give failures per unit-hour (0 = never fails)", positive=False)

    @classmethod
    def from_mtbf_hours(cls, **mtbf_hours: float) -> FailureRates:
        """Rates from per-unit MTBFs in hours (``math.inf`` = never fails); classes not
        named keep their default.

        Examples
        --------
        >>> FailureRates.from_mtbf_hours(switch=math.inf).switch
        0.0
        >>> FailureRates.from_mtbf_hours(gpus=1.0)
        Traceback (most recent call last):
        ...
        fabricsim.errors.UnknownPresetError: rates: unknown component class 'gpus'; did \
you mean 'gpu'?
        """
        rates = asdict(cls())
        for name, mtbf in mtbf_hours.items():
            if name not in rates:
                raise unknown("component class", name, COMPONENT_CLASSES, field="rates")
            if isinstance(mtbf, bool) or not isinstance(mtbf, numbers.Real) or \
                    math.isnan(mtbf) or mtbf <= 0:
                raise ConfigError(f"MTBF must be a positive number of hours (math.inf = "
                                  f"never fails), got {mtbf!r}", field=f"rates.{name}")
            rates[name] = 0.0 if math.isinf(mtbf) else 1.0 / float(mtbf)
        return cls(**rates)

    def as_dict(self) -> dict[str, float]:
        """Rates by class (failures per unit-hour).

        Examples
        --------
        >>> list(FailureRates().as_dict()) == list(COMPONENT_CLASSES)
        True
        """
        return {c: float(getattr(self, c)) for c in COMPONENT_CLASSES}

    def mtbf_hours(self) -> dict[str, float]:
        """Per-unit MTBF by class in hours (``math.inf`` where the rate is 0).

        Examples
        --------
        >>> FailureRates(gpu=0.25).mtbf_hours()["gpu"]
        4.0
        """
        return {c: (1.0 / r if r > 0 else math.inf) for c, r in self.as_dict().items()}


# --- Helpers -------------------------------------------------------------------------------

def checkpoint_size_bytes(params: float,
                          bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM) -> float:
    """Bytes of a full training checkpoint of a model with ``params`` parameters.

    Default 14 B/param: BF16 weights (2) + FP32 master weights (4) + Adam's first and second
    moments in FP32 (4 + 4). Pass ``bytes_per_param=16`` to also count FP32 gradients,
    or 12 if the BF16 copy is not saved.

    Examples
    --------
    >>> checkpoint_size_bytes(405e9) / 1e12  # Llama 3 405B: 5.67 TB
    5.67
    >>> checkpoint_size_bytes(0)
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: params: must be a positive, finite number, got 0; give \
the model's parameter count, e.g. 405e9
    """
    p = _number(params, "params", "give the model's parameter count, e.g. 405e9",
                positive=True)
    b = _number(bytes_per_param, "bytes_per_param",
                "14 for BF16 weights + FP32 master + Adam moments", positive=True)
    return p * b


def young_daly_interval_s(blocking_s: float, mtbf_s: float) -> float:
    """The checkpoint interval that minimises lost time, ``√(2·blocking_s·mtbf_s)``.

    First-order optimum (Young 1974; Daly 2006) of ``blocking_s/τ + τ/(2·mtbf_s)``, the
    share of time spent writing checkpoints plus the share of work lost to failures.

    Examples
    --------
    >>> young_daly_interval_s(50.0, 10_000.0)
    1000.0
    """
    b = _number(blocking_s, "blocking_s", "give the seconds a checkpoint stalls training",
                positive=False)
    m = _number(mtbf_s, "mtbf_s", "give the job's mean time between failures in seconds",
                positive=True)
    return math.sqrt(2.0 * b * m)


# --- Result --------------------------------------------------------------------------------

@dataclass(frozen=True)
class GoodputResult(Tabular):
    """What failures cost a training job (SI units; fractions of wall-clock time).

    Examples
    --------
    >>> r = goodput(1024, switches=48, links=3072, step_time_s=2.0,
    ...             checkpoint_bytes=1e12, checkpoint_write_bytes_per_s=1e11)
    >>> r.goodput + r.lost_fraction
    1.0
    >>> sorted(r.failures_per_day_by_class) == sorted(COMPONENT_CLASSES)
    True
    >>> float(r.to_pandas()["goodput"].iloc[0]) == r.goodput
    True
    """

    gpus: int
    servers: int
    nics: int
    switches: int
    links: int
    job_mtbf_hours: float
    """Mean time between job-stopping failures, ``1 / Σ rate × units``."""
    failures_per_day: float
    failures_per_day_by_class: dict[str, float]
    """Expected failures per day of each class in :data:`COMPONENT_CLASSES`."""
    step_time_s: float
    checkpoint_bytes: float
    checkpoint_write_s: float
    """Time to write one checkpoint, ``checkpoint_bytes / bandwidth``."""
    checkpoint_blocking_s: float
    """Part of the write that stalls training."""
    checkpoint_interval_s: float
    """Training time between checkpoints (the Young/Daly default is whole steps)."""
    checkpoint_interval_steps: int
    restart_s: float
    lost_checkpoint: float
    """Share of wall time stalled writing checkpoints, ``b/τ``."""
    lost_work: float
    """Share of wall time redoing work lost at failures, ``(τ/2 + w − b)/M``."""
    lost_restart: float
    """Share of wall time restarting, ``R/M``."""
    goodput: float
    """Share of wall time that trains, ``1 − lost_fraction``."""
    gpu_hour_usd: float
    usd_lost_per_day: float
    """``gpus × 24 × gpu_hour_usd × lost_fraction``."""

    @property
    def lost_fraction(self) -> float:
        """Share of wall time that does not train (checkpoints + lost work + restarts)."""
        return self.lost_checkpoint + self.lost_work + self.lost_restart

    def to_dict(self) -> dict[str, float | int]:
        """Flat, JSON-safe dict (per-class failures as ``failures_per_day_<class>``).

        Examples
        --------
        >>> import json
        >>> r = goodput(64, switches=4, links=128, step_time_s=1.0,
        ...             checkpoint_bytes=1e11, checkpoint_write_bytes_per_s=1e10)
        >>> d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
        >>> d["gpus"], "failures_per_day_switch" in d
        (64, True)
        """
        out: dict[str, float | int] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, dict):
                out.update({f"{f.name.removesuffix('_by_class')}_{k}": float(x)
                            for k, x in v.items()})
            else:
                out[f.name] = v
        out["lost_fraction"] = self.lost_fraction
        bad = [k for k, v in out.items() if not math.isfinite(v)]
        if bad:  # unreachable for validated inputs; never emit NaN or inf
            raise ModelError(f"non-finite results: {', '.join(bad)}", field="goodput")
        return out


# --- Model ---------------------------------------------------------------------------------

def goodput(gpus: int, *, switches: int, links: int, step_time_s: float,
            checkpoint_bytes: float, checkpoint_write_bytes_per_s: float,
            gpus_per_server: int = 8, nics_per_server: int = 8,
            hosts_per_server: int = 1, restart_s: float = DEFAULT_RESTART_S,
            checkpoint_interval_s: float | None = None,
            checkpoint_blocking_fraction: float = 1.0,
            rates: FailureRates | None = None,
            gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD) -> GoodputResult:
    """Goodput of a synchronous training job on ``gpus`` GPUs (first-order model).

    ``switches`` and ``links`` are the scale-out fabric's switch and link counts (e.g.
    ``sum(fab.info.extra["switches"].values())`` and ``sum(fab.info.cables.values())`` of a
    built fabric; 0 for one server). A job occupies whole servers:
    ``servers = ⌈gpus / gpus_per_server⌉``, ``nics = servers × nics_per_server``,
    ``hosts = servers × hosts_per_server`` (the host rate is per two-socket host, as the
    Llama 3 servers it comes from; an NVL72 rack holds 18 such compute trays).
    ``checkpoint_write_bytes_per_s`` is the aggregate bandwidth to storage.
    ``checkpoint_blocking_fraction`` is the share of the write that stalls training
    (1 = synchronous, 0.1 = asynchronous after a copy to host memory). Without
    ``checkpoint_interval_s`` the Young/Daly optimum is used (module docstring).
    ``rates`` defaults to :class:`FailureRates` (Llama 3 derived).

    Raises :class:`~fabricsim.errors.ConfigError` naming the field for invalid inputs and
    :class:`~fabricsim.errors.ModelError` when failures come so often that the job would
    never make progress (lost fraction >= 1: the first-order model no longer applies).

    Examples
    --------
    >>> r = goodput(8, switches=0, links=0, step_time_s=1.0, checkpoint_bytes=1e11,
    ...             checkpoint_write_bytes_per_s=1e10, rates=FailureRates(
    ...                 gpu=1e-5, nic=0, link=0, switch=0, host=0, software=0))
    >>> r.job_mtbf_hours, round(r.failures_per_day, 6)  # 8 GPUs × 1e-5 /h
    (12500.0, 0.00192)
    >>> goodput(0, switches=0, links=0, step_time_s=1.0, checkpoint_bytes=1e9,
    ...         checkpoint_write_bytes_per_s=1e9)
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: gpus: must be >= 1, got 0; give the number of GPUs in \
the job
    """
    n = _int_at_least(gpus, "gpus", 1, "give the number of GPUs in the job")
    gps = _int_at_least(gpus_per_server, "gpus_per_server", 1,
                        "give GPUs per server, e.g. 8 for a DGX/HGX H100")
    nps = _int_at_least(nics_per_server, "nics_per_server", 0,
                        "give scale-out NICs per server, e.g. 8 for a DGX H100")
    sw = _int_at_least(switches, "switches", 0,
                       "give the fabric's switch count (0 for a single server)")
    ln = _int_at_least(links, "links", 0,
                       "give the fabric's scale-out link count (0 for a single server)")
    step = _number(step_time_s, "step_time_s",
                   "give the seconds one training step takes", positive=True)
    ckpt = _number(checkpoint_bytes, "checkpoint_bytes",
                   "give the checkpoint size, e.g. checkpoint_size_bytes(params)",
                   positive=True)
    bw = _number(checkpoint_write_bytes_per_s, "checkpoint_write_bytes_per_s",
                 "give the aggregate write bandwidth to storage in bytes/s, e.g. 1e11",
                 positive=True)
    restart = _number(restart_s, "restart_s",
                      "give seconds from failure to training again, e.g. 600", positive=False)
    frac = _number(checkpoint_blocking_fraction, "checkpoint_blocking_fraction",
                   "give a share between 0 and 1 (1 = synchronous)", positive=False)
    if frac > 1:
        raise ConfigError(f"must be between 0 and 1, got {frac}; 1 = synchronous "
                          "checkpoints, less for asynchronous ones",
                          field="checkpoint_blocking_fraction")
    price = _number(gpu_hour_usd, "gpu_hour_usd", "give the price of a GPU-hour in USD",
                    positive=False)
    if rates is None:
        rates = FailureRates()
    elif not isinstance(rates, FailureRates):
        raise ConfigError(f"must be a FailureRates, got {type(rates).__name__}",
                          field="rates")

    hps = _int_at_least(hosts_per_server, "hosts_per_server", 1,
                        "give hosts (CPU trays) per server: 1, or 18 for an NVL72 rack")
    servers = -(-n // gps)
    units = {"gpu": n, "nic": servers * nps, "link": ln, "switch": sw,
             "host": servers * hps, "software": n}
    per_hour = {c: r * units[c] for c, r in rates.as_dict().items()}
    total = sum(per_hour.values())
    if total <= 0:
        raise ConfigError("every failure rate is 0 for this job, so its MTBF is infinite; "
                          "give at least one positive rate", field="rates")
    mtbf_s = 3600.0 / total

    write = ckpt / bw
    blocking = frac * write
    background = write - blocking
    if checkpoint_interval_s is None:
        tau = max(young_daly_interval_s(blocking, mtbf_s), background, step)
        steps = max(1, round(tau / step))
        if steps * step < background:
            steps = math.ceil(background / step)
    else:
        tau = _number(checkpoint_interval_s, "checkpoint_interval_s",
                      "give seconds of training between checkpoints, or None for the "
                      "Young/Daly optimum", positive=True)
        if tau < step:
            raise ConfigError(f"must be at least one step ({step:g} s), got {tau:g}; "
                              "checkpoints are taken between steps (None = Young/Daly "
                              "optimum)", field="checkpoint_interval_s")
        if tau < background:
            raise ConfigError(f"{tau:g} s is shorter than the asynchronous write "
                              f"({background:g} s), which must end before the next "
                              "checkpoint; use a longer interval or faster storage",
                              field="checkpoint_interval_s")
        steps = max(1, round(tau / step))
    interval = tau if checkpoint_interval_s is not None else steps * step

    lost_ckpt = blocking / interval
    lost_work = (interval / 2.0 + background) / mtbf_s
    lost_restart = restart / mtbf_s
    lost = lost_ckpt + lost_work + lost_restart
    if lost >= 1.0:  # the field: a step longer than the MTBF, the restarts, or the
        # checkpoints (whose cost sets their own share and the interval's lost work)
        cause = "step_time_s" if step >= mtbf_s else "restart_s" \
            if lost_restart > lost_ckpt + lost_work else "checkpoint_write_bytes_per_s"
        if cause == "step_time_s":
            raise ModelError(f"one step takes {step / 3600.0:.3g} h, longer than the "
                             f"{mtbf_s / 3600.0:.3g} h between failures: the job would "
                             f"rarely finish one; shorten the step (a smaller global batch "
                             f"or more GPUs)", field=cause)
        raise ModelError(
            f"failures every {mtbf_s / 3600.0:.3g} h cost more than all the wall time "
            f"(checkpoints {lost_ckpt:.0%}, lost work {lost_work:.0%}, restarts "
            f"{lost_restart:.0%}); the job would not progress: use fewer GPUs, faster "
            "restarts or checkpoints, or lower failure rates", field=cause)
    return GoodputResult(
        gpus=n, servers=servers, nics=units["nic"], switches=sw, links=ln,
        job_mtbf_hours=mtbf_s / 3600.0, failures_per_day=total * 24.0,
        failures_per_day_by_class={c: v * 24.0 for c, v in per_hour.items()},
        step_time_s=step, checkpoint_bytes=ckpt, checkpoint_write_s=write,
        checkpoint_blocking_s=blocking, checkpoint_interval_s=interval,
        checkpoint_interval_steps=steps, restart_s=restart, lost_checkpoint=lost_ckpt,
        lost_work=lost_work, lost_restart=lost_restart, goodput=1.0 - lost,
        gpu_hour_usd=price, usd_lost_per_day=n * 24.0 * price * lost)


#: Ceiling of a storage system's sustained checkpoint write throughput (bytes/s) when the
#: caller gives none: Llama 3 paper, Sec. 3.3.1 (Tectonic: 2 TB/s sustained, 7 TB/s peak
#: over 7,500 servers).
STORAGE_WRITE_CAP = 2e12


def _hosts_per_server(system: str) -> int:
    """Two-socket hosts in one server of ``system`` (an NVL72 rack's 36 Grace CPUs: 18
    compute trays); 1 for a system not in the catalog or without CPUs listed."""
    from fabricsim.catalog import get_catalog

    sysp = get_catalog().systems.get(system)
    return max(1, sysp.cpus // 2) if sysp is not None else 1


@dataclass(frozen=True)
class GoodputInputs:
    """What a job says of its failures' cost: the aggregate checkpoint write bandwidth
    (bytes/s; ``None``: the servers' storage NICs, :func:`goodput_on_fabric`) and the
    seconds to detect a failure, reschedule and reload.

    >>> GoodputInputs().restart_s
    600.0
    """

    checkpoint_write_bytes_per_s: float | None = None
    restart_s: float = DEFAULT_RESTART_S


def storage_write_bytes_per_s(fabric: Fabric, servers: int) -> float:
    """Checkpoint write bandwidth of ``servers`` servers of ``fabric``: their storage NICs
    at line rate (the scale-out NICs' rate per server where the system has none), at
    most :data:`STORAGE_WRITE_CAP`.

    >>> from fabricsim.fabric import build_cluster
    >>> storage_write_bytes_per_s(build_cluster("dgx-h100", 2), 2) / 1e9  # 2 x 2 x 400G
    200.0
    """
    from fabricsim.catalog import get_catalog

    info = fabric.info
    cat = get_catalog()
    sysp = cat.systems.get(info.system)
    per = (sysp.storage_nics * cat.nic(sysp.storage_nic).bandwidth
           if sysp is not None and sysp.storage_nics and sysp.storage_nic
           else info.nic_bandwidth)
    return min(max(per, 1.0) * max(servers, 1), STORAGE_WRITE_CAP)


def goodput_on_fabric(fabric: Fabric, *, params: float, step_time_s: float,
                      gpus: int | None = None, gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD,
                      checkpoint_write_bytes_per_s: float | None = None,
                      restart_s: float = DEFAULT_RESTART_S,
                      servers: int | None = None) -> GoodputResult:
    """:func:`goodput` of a job of a ``params``-parameter model on a built ``fabric``: its
    switch and cable counts, GPUs and NICs per server come from ``fabric.info``; the
    checkpoint (:func:`checkpoint_size_bytes`) is written at
    ``checkpoint_write_bytes_per_s``, by default every server's storage NICs at line rate,
    at most :data:`STORAGE_WRITE_CAP`. A job on ``servers`` of a larger shared cluster
    counts that share of the fabric's switches and cables (those under its servers and
    its part of the spine), not all of them.

    Example
    -------
    >>> from fabricsim.fabric import build_cluster
    >>> r = goodput_on_fabric(build_cluster("dgx-h100", 128), params=70e9, step_time_s=5.0)
    >>> 0.9 < r.goodput < 1.0, r.servers
    (True, 128)
    """
    info = fabric.info
    if checkpoint_write_bytes_per_s is None:
        checkpoint_write_bytes_per_s = storage_write_bytes_per_s(fabric, info.servers)
    share = 1.0 if servers is None else min(servers / max(info.servers, 1), 1.0)
    return goodput(gpus or fabric.n_gpus,
                   switches=round(share * sum((info.extra.get("switches") or {}).values())),
                   links=round(share * sum(dict(info.cables).values())),
                   step_time_s=step_time_s,
                   checkpoint_bytes=checkpoint_size_bytes(params),
                   checkpoint_write_bytes_per_s=checkpoint_write_bytes_per_s,
                   gpus_per_server=max(info.gpus_per_server, 1),
                   nics_per_server=max(info.nics_per_server, 0),
                   hosts_per_server=_hosts_per_server(info.system), restart_s=restart_s,
                   gpu_hour_usd=gpu_hour_usd)
