"""Turn the engine's arrays into a :class:`~fabricsim.backends.Result` and a summary.

``Result.extra`` of the packet backend holds:

* ``status`` (``ok``, ``until``, ``pfc_deadlock`` or ``stalled``), ``complete``,
  ``transport``, ``events``, ``data_packets`` (packets leaving senders, retransmissions
  included), ``hop_packets`` (packet transmissions on all links), ``wall_s``,
  ``events_per_s``;
* ``fct`` — flow completion records: ``flow``, ``rep``, ``start``, ``end``, ``src``, ``dst``;
* ``drops`` — ``lossless`` (must stay 0), ``lossy`` (tail drops), ``watchdog``,
  ``random_loss``, ``link_down`` (sent onto an Ethernet link while it was down),
  ``pfc_mismatch`` (a lossless class dropped where a port does not pause it);
  ``retransmits``, ``timeouts``, ``naks``, ``cnps``, ``ecn_marks``, ``pause_frames``,
  ``watchdog_triggers``, ``link_changes`` (timed link faults entered or left); on ``uet``
  ``trims`` (packets switches cut to their headers; each is NACKed), ``llr_replays``
  (frames resent by link-level retry), ``grants`` (RCCC credit grants);
* ``faults`` (descriptions); with ``status`` ``pfc_deadlock`` a ``deadlock`` entry
  (ports, ``cycle``, detection time; see :mod:`~fabricsim.backends.packet.deadlock`),
  with ``stalled`` a ``stalled`` entry (the down links);
* per link arrays: ``pause_time`` (s paused, summed over classes), ``pause_first`` (first
  pause, NaN if never), ``queue_max`` (bytes); per node ``buffer_max``;
* ``ts`` — time series of ``bins`` bins: ``t`` (bin starts), ``delivered_Bps``,
  ``flow_Bps`` (first 64 flows), ``queue`` (max bytes per bin of the ``watched`` links),
  ``paused_ports``.

Example
-------
>>> jain([1.0, 1.0, 1.0]), round(jain([1.0, 0.0]), 2)
(1.0, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.base import Result
from fabricsim.backends.packet import layout as L
from fabricsim.backends.packet.build import State
from fabricsim.fabric.core import Fabric


def jain(x: Sequence[float] | NDArray[np.float64]) -> float:
    """Jain's fairness index of ``x``: 1 when all equal, 1/n when one takes all."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0 or not np.any(a):
        return 1.0
    return float(a.sum() ** 2 / (a.size * (a * a).sum()))


def make_result(st: State, fabric: Fabric, *, end: float, wall: float, mode: str,
                status: str) -> Result:
    """Build the Result of a finished engine run."""
    a = st.arrays
    C = a["C"]
    ns = len(a["SI"]) if st.n_flows or len(a["SI"]) else 0
    SI, SF = a["SI"], a["SF"]
    done = SI[:, L.S_DONE] == 1
    step_start = SF[:ns, L.SF_START].copy()
    step_end = np.where(done[:ns], SF[:ns, L.SF_END], np.nan)
    complete = bool(done[:ns].all())
    t = float(np.nanmax(step_end, initial=0.0)) if complete else float(end)
    link_bytes = a["LF"][:, L.LF_BYTES].copy()
    util = link_bytes / (fabric.link_capacity * t) if t > 0 else np.zeros(fabric.n_links)
    bl = int(np.argmax(util)) if util.size and util.max() > 0 else -1
    NP = st.nprio
    QF = a["QF"].reshape(fabric.n_links, NP, L.N_QF)
    QI = a["QI"].reshape(fabric.n_links, NP, L.N_QI)
    pause = QF[:, :, L.QF_PAUSE].copy()
    still = QI[:, :, L.Q_PAUSED] == 1
    pause[still] += end - QF[:, :, L.QF_T0][still]
    first = QF[:, :, L.QF_FIRST]
    first = np.where(first >= 0, first, np.inf).min(axis=1)
    nrec = int(C[L.C_NREC])
    RF, RT = a["RF"][:nrec], a["RT"][:nrec]
    fl = RF[:, 0]
    ev = int(C[L.C_EVENTS])
    nb = len(a["TS_D"])
    dt = st.bin_dt
    extra: dict[str, Any] = {
        "status": status, "complete": complete, "transport": mode,
        "warnings": list(st.meta.get("warnings", [])),
        "events": ev, "data_packets": int(C[L.C_DATA_PKTS]),
        "hop_packets": int(C[L.C_HOP_PKTS]), "wall_s": wall,
        "events_per_s": ev / wall if wall > 0 else 0.0,
        "delivered_bytes": int(C[L.C_DELIVERED]),
        "fct": {"flow": fl, "rep": RF[:, 1], "start": RT[:, 0], "end": RT[:, 1],
                "src": st.flow_src[fl], "dst": st.flow_dst[fl]},
        "drops": {"lossless": int(C[L.C_DROP_LOSSLESS]), "lossy": int(C[L.C_DROP_LOSSY]),
                  "watchdog": int(C[L.C_DROP_WD]), "random_loss": int(C[L.C_DROP_LOSS]),
                  "link_down": int(C[L.C_DROP_DOWN]),
                  "pfc_mismatch": int(C[L.C_DROP_NOPFC])},
        "link_changes": int(C[L.C_LINK_FLIPS]),
        "retransmits": int(C[L.C_RETX]), "timeouts": int(C[L.C_TIMEOUTS]),
        "naks": int(C[L.C_NAKS]), "cnps": int(C[L.C_CNPS]), "ecn_marks": int(C[L.C_ECN]),
        "pause_frames": int(C[L.C_PAUSES]), "watchdog_triggers": int(C[L.C_WD_TRIG]),
        "trims": int(C[L.C_TRIMS]), "llr_replays": int(C[L.C_LLR]),
        "grants": int(C[L.C_GRANTS]),
        "pause_time": pause.sum(axis=1), "pause_first": np.where(np.isfinite(first), first,
                                                                 np.nan),
        "queue_max": a["LF"][:, L.LF_QMAX].copy(),
        "buffer_max": a["NDF"][:, L.N_MAXUSED].copy(),
        "pool_high": int(C[L.C_POOL_HIGH]),
        "ts": {"t": np.arange(nb) * dt, "dt": dt, "delivered_Bps": a["TS_D"] / dt,
               "flow_Bps": a["TS_F"] / dt, "queue": a["TS_Q"], "watched": st.watched,
               "paused_ports": a["TS_NP"]},
        "stuck_node": st.stuck_node,
        "credits_final": a["QF"][:, L.QF_CRED].copy(),
        "credits_initial": np.repeat(st.meta["credit"], NP),
        "node_used_final": a["NDF"][:, L.N_USED].copy(),
    }
    return Result(time=t, backend="packet", step_start=step_start, step_end=step_end,
                  link_bytes=link_bytes, bottleneck_link=bl,
                  bottleneck_kind=fabric.link_label(bl) if bl >= 0 else "", extra=extra)
