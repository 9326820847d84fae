"""The event-driven driver of the flow backend.

Steps of a :class:`~fabricsim.schedule.Schedule` are launched when their dependencies end
(plus the step's ``delay``); each repetition of a step is a *group* of jobs that starts
when the previous repetition ends. Within a repetition a transfer first waits for its path
latency (and any straggler delay of its sender), then shares link capacity max-min fairly
with every other active flow until its bytes are through; it ends then (as SimGrid's
``CM02`` model does). The compiled kernel (:mod:`~fabricsim.backends.flow.kernel`) runs
events between the driver's external events: step launches, capacity changes of flapping
links, background traffic starting.

Identical repetitions (``exploit_repeats=True``): when the fabric is idle at the moment a
set of steps launches their next repetition, and the previous launch was the same set of
steps one repetition earlier, also from idle, with no external event (capacity change,
background traffic, other launch) in between, then the next epoch is an exact replay of
the last one (same routes, same capacities, same start state). The driver then skips
``m`` epochs at once — time advances by ``m × d``, link bytes and bottleneck time by ``m``
times the last epoch's — where ``m`` keeps one repetition of every step to simulate and
stops before the next external event. Two repetitions of each step are always simulated;
with flapping links or background traffic the skip only happens between their events, and
a straggler's delay recurs identically per repetition so it does not prevent it.

Example
-------
>>> import numpy as np
>>> from fabricsim.backends.flow.faults import FaultPlan
>>> from fabricsim.backends.flow.testing import host_fat_tree
>>> from fabricsim.schedule import Schedule, Step
>>> fab = host_fat_tree(4)
>>> ring = Step(src=fab.gpus, dst=np.roll(fab.gpus, -1), nbytes=np.full(4, 1e6), repeat=6)
>>> out = simulate(Schedule(steps=(ring,)), FaultPlan(fab))
>>> round(out.time * 1e6, 3), out.skipped_epochs
(144.0, 4)
"""

from __future__ import annotations

import heapq
import time as _time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabricsim.backends.base import channel_share, ramp_bytes
from fabricsim.backends.flow.background import BackgroundTransfers
from fabricsim.backends.flow.faults import FaultPlan
from fabricsim.backends.flow.kernel import BUDGET, STALL, Pool
from fabricsim.backends.flow.routing import Expanded, apply_protocol, expand, stripe_planes
from fabricsim.errors import SimulationError
from fabricsim.protocols import Protocol
from fabricsim.schedule.core import Schedule

F8 = NDArray[np.float64]
I8 = NDArray[np.int64]
_LAUNCH, _FLAP, _BG = 0, 1, 2
#: The link timeline keeps at most about this many instants (older ones are thinned).
MAX_SNAPSHOTS = 512


@dataclass
class SimOutput:
    """Raw output of :func:`simulate` (the backend turns it into a Result)."""

    time: float
    step_start: F8
    step_end: F8
    rep_start: list[F8]
    rep_end: list[F8]
    link_bytes: F8
    critical_time: F8
    stalled_steps: list[int]
    stalled_transfers: list[tuple[int, int]]
    transfers: dict[str, F8 | I8]
    timeline_t: F8
    timeline_bytes: F8
    skipped_epochs: int = 0
    kernel_calls: int = 0
    notes: list[str] = field(default_factory=list)


#: Events the kernel runs between two looks at the wall clock at first (with a time
#: limit or a progress callback; the driver also looks after every kernel call); then
#: adapted so that a call lasts about PROGRESS_S (entering one costs O(jobs)).
EVENT_CHUNK = 64
#: Seconds between two progress reports.
PROGRESS_S = 0.25


def simulate(schedule: Schedule, plan: FaultPlan,
             background: Sequence[BackgroundTransfers] = (), *, routing: str = "ecmp",
             qps: int = 1, seed: int = 0, exploit_repeats: bool = True,
             record_timeline: bool = False, protocol: Protocol | None = None,
             time_limit_s: float | None = None,
             progress: Callable[[int, int, float, int], None] | None = None,
             routed: Mapping[int, Expanded] | None = None,
             precision: float = 0.0) -> SimOutput:
    """Run ``schedule`` on ``plan.fabric`` (see the module docstring for the model).

    With a ``protocol``, its launch overhead delays the first steps and its efficiencies
    and hop overheads apply to the schedule's transfers (not to background traffic).
    ``time_limit_s`` stops the run with a :class:`~fabricsim.errors.SimulationError`
    (field ``--time-limit``) once that much wall time has passed; ``progress`` is called
    about every :data:`PROGRESS_S` seconds with (steps done, steps, simulated time,
    solver calls). ``routed``: steps already routed (and striped over NVSwitch planes) by
    index, as :func:`~fabricsim.backends.flow.memory.estimate` leaves them, used as they
    are. ``precision``: finishes settled together (:func:`~fabricsim.backends.flow.kernel.
    advance`); 0 is exact.
    """
    wall0 = last_report = _time.perf_counter()
    chunk = EVENT_CHUNK if (time_limit_s is not None or progress is not None) else 1 << 62
    fab = plan.fabric
    n_steps = len(schedule.steps)
    steps = schedule.steps
    base_cap = fab.link_capacity.astype(np.float64)
    cap = np.where(fab.link_up, base_cap, 0.0)
    pool = Pool.empty(fab.n_links)
    n_groups = int(sum(s.repeat for s in steps)) + 1
    g_left = np.zeros(n_groups, dtype=np.int64)
    g_end = np.full(n_groups, np.nan)
    g_bneck = np.full(n_groups, -1, dtype=np.int64)
    g_start = np.zeros(n_groups)
    g_step = np.zeros(n_groups, dtype=np.int64)
    g_rep = np.zeros(n_groups, dtype=np.int64)
    n_g = 0
    templates: dict[int, tuple[Expanded, F8]] = {}
    off = np.concatenate([[0], np.cumsum([s.repeat for s in steps])]).astype(np.int64)
    rep_start_flat = np.full(int(off[-1]) + 1, np.nan)
    rep_end_flat = np.full(int(off[-1]) + 1, np.nan)
    rep_start = [rep_start_flat[off[i]:off[i + 1]] for i in range(n_steps)]
    rep_end = [rep_end_flat[off[i]:off[i + 1]] for i in range(n_steps)]
    # the general solver lets the kernel run a step's repetitions back to back itself
    in_kernel = not exploit_repeats and not record_timeline
    g_more = np.zeros(n_groups, dtype=np.int64)
    g_flat = np.zeros(n_groups, dtype=np.int64)
    step_start = np.full(n_steps, np.nan)
    step_end = np.full(n_steps, np.nan)
    crit = np.zeros(fab.n_links)
    step_repeat = np.array([s.repeat for s in steps], dtype=np.int64)
    dependents: list[list[int]] = [[] for _ in range(n_steps)]
    for i, s in enumerate(steps):
        for d in s.deps:
            dependents[d].append(i)
    finished = np.zeros(n_steps, dtype=bool)
    dead = np.zeros(n_steps, dtype=bool)
    stalled_tr: list[tuple[int, int]] = []
    stalled_steps: list[int] = []
    heap: list[tuple[float, int, int, int, int]] = []
    seq = 0

    def push(t: float, kind: int, a: int, b: int = 0) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, kind, a, b))
        seq += 1

    for i, s in enumerate(steps):
        if not s.deps:
            push(s.delay + (protocol.launch if protocol is not None else 0.0), _LAUNCH, i, 0)
    for k, fl in enumerate(plan.flaps):
        if not fl.is_up(0.0):
            cap[list(fl.links)] = base_cap[list(fl.links)] * fl.factor
        push(fl.next_change(0.0), _FLAP, k)
    for k, bg in enumerate(background):
        push(bg.start, _BG, k)

    rec: list[dict[str, F8 | I8]] = []
    tl_t: list[float] = [0.0]
    tl_b: list[F8] = [pool.link_bytes.copy()] if record_timeline else []
    remaining = n_steps
    t: float = 0.0
    last_idle: tuple[tuple[int, ...], tuple[int, ...], float, F8, F8, int] | None = None
    ext_count = 0
    skipped = 0
    calls = 0
    bg_alive = 0

    def template(i: int) -> tuple[Expanded, F8]:
        if i not in templates:
            s = steps[i]
            ex = routed.get(i) if routed is not None else None
            if ex is None:
                ex = stripe_planes(fab, expand(fab, s.src, s.dst, s.nbytes, hashes=s.hashes,
                                               mode=routing, qps=qps, seed=seed,
                                               channel=s.channel))
            if protocol is not None:
                ex = apply_protocol(fab, ex, protocol, ramp_bytes(schedule, protocol),
                                    channel_share(schedule, protocol))
            templates[i] = (ex, plan.delays(ex.src) * s.rounds)
        return templates[i]

    def kill(i: int) -> None:
        nonlocal remaining
        if dead[i] or finished[i]:
            return
        dead[i] = True
        remaining -= 1
        for d in dependents[i]:
            kill(d)

    def launch(i: int, r: int, now: float) -> None:
        nonlocal n_g
        ex, delay = template(i)
        g = n_g
        n_g += 1
        g_step[g], g_rep[g], g_start[g] = i, r, now
        g_flat[g] = off[i] + r
        g_more[g] = steps[i].repeat - 1 - r if in_kernel else 0
        rep_start[i][r] = now
        if r == 0:
            step_start[i] = now
        if not ex.routable.all():
            for j in np.flatnonzero(~ex.routable):
                stalled_tr.append((i, int(ex.tag[j])))
            stalled_steps.append(i)
            kill(i)
            return
        act = now + ex.latency + delay
        g_left[g] = ex.n_jobs
        if ex.n_jobs == 0:
            g_left[g] = 1  # an empty step ends at once: one zero-byte job with no links
            pool.add(np.zeros(1), np.array([now]), np.array([g]), np.array([0, 0]),
                     np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
                     np.zeros(0), now=now)
            return
        pool.add(ex.size, act, np.full(ex.n_jobs, g, dtype=np.int64), ex.job_fptr,
                 ex.flow_ptr, ex.links, ex.coef, ex.weight, now=now, tag=ex.tag,
                 frac=ex.frac)

    while remaining > 0:
        tol = 1e-12 * max(t, 1e-9)
        launches: list[tuple[int, int]] = []
        while heap and heap[0][0] <= t + tol:
            _, _, kind, a, b = heapq.heappop(heap)
            if kind == _LAUNCH:
                launches.append((a, b))
            elif kind == _FLAP:
                fl = plan.flaps[a]
                idx = list(fl.links)
                up = fl.is_up(t)
                cap[idx] = np.where(fab.link_up[idx], base_cap[idx] * (1.0 if up else
                                                                       fl.factor), 0.0)
                pool.dirty[idx] = True
                push(fl.next_change(t), _FLAP, a)
                ext_count += 1
            else:
                bg = background[a]
                ex = expand(fab, bg.src, bg.dst, bg.nbytes, mode=routing, qps=qps, seed=seed,
                            channel=1000 + a, weight=bg.weight)
                ex = stripe_planes(fab, ex)
                ok = ex.routable
                pool.add(ex.size, np.where(ok, t + ex.latency, np.inf),
                         np.full(ex.n_jobs, -1, dtype=np.int64), ex.job_fptr, ex.flow_ptr,
                         ex.links, ex.coef, ex.weight, now=t, frac=ex.frac)
                bg_alive += int(ok.sum())
                ext_count += 1
        if launches:
            launches.sort()
            idle = pool.n_jobs == 0
            key = tuple(i for i, _ in launches)
            reps = tuple(r for _, r in launches)
            if exploit_repeats and idle and last_idle is not None:
                pkey, preps, pt, pbytes, pcrit, pext = last_idle
                span = t - pt
                if (pkey == key and pext == ext_count and span > 0 and
                        all(r == p + 1 for r, p in zip(reps, preps, strict=True))):
                    m = min(steps[i].repeat - 1 - r for i, r in launches)
                    if heap:
                        m = min(m, int((heap[0][0] - t) // span))
                    if m >= 1:
                        for i, r in launches:
                            dur = rep_end[i][r - 1] - rep_start[i][r - 1]
                            ks = np.arange(m)
                            rep_start[i][r:r + m] = t + ks * span
                            rep_end[i][r:r + m] = t + ks * span + dur
                        pool.link_bytes += m * (pool.link_bytes - pbytes)
                        crit += m * (crit - pcrit)
                        t += m * span
                        skipped += m
                        launches = [(i, r + m) for i, r in launches]
                        reps = tuple(r for _, r in launches)
                        if record_timeline:
                            tl_t.append(t)
                            tl_b.append(pool.link_bytes.copy())
            if idle:
                last_idle = (key, reps, t, pool.link_bytes.copy(), crit.copy(), ext_count)
            else:
                last_idle = None
            for i, r in launches:
                launch(i, r, t)
            if remaining <= 0:
                break
        t_limit = heap[0][0] if heap else np.inf
        call0 = _time.perf_counter()
        code, t_new, done = pool.run(t, t_limit, cap, n_groups, g_left, g_end, g_bneck,
                                     (g_more, g_flat, g_start, rep_start_flat, rep_end_flat,
                                      crit), max_events=chunk, precision=precision)
        t = float(t_new)
        calls += 1
        if code == BUDGET:  # a call costs O(jobs) to enter: keep calls near PROGRESS_S
            spent = _time.perf_counter() - call0
            chunk = int(min(max(chunk * PROGRESS_S / max(spent, 1e-6), EVENT_CHUNK / 4),
                            chunk * 4, 1 << 20))
        if time_limit_s is not None or progress is not None:
            now_wall = _time.perf_counter()
            if progress is not None and now_wall - last_report >= PROGRESS_S:
                last_report = now_wall
                progress(n_steps - remaining, n_steps, t, calls)
            if time_limit_s is not None and now_wall - wall0 > time_limit_s:
                raise SimulationError(
                    f"time limit of {time_limit_s:g} s reached after {calls:,} solver "
                    f"calls, at simulated t = {t * 1e6:.1f} us with "
                    f"{n_steps - remaining} of {n_steps} steps done; raise --time-limit, "
                    + ("" if precision > 0 else "settle close finishes together "
                       "(--flow-precision 1e-3: each transfer at most 0.1 % late), ")
                    + "use the analytic backend, or simulate a smaller group",
                    field="--time-limit")
        if code == BUDGET:  # the kernel paused mid-group: go on from where it stopped
            continue
        if code == STALL:
            for g in range(n_g):
                i = int(g_step[g])
                if not finished[i] and not dead[i] and g_left[g] > 0:
                    stalled_steps.append(i)
                    kill(i)
            break
        for g in done:
            i = int(g_step[g])
            r = int(g_flat[g] - off[i])
            g_rep[g] = r
            rep_end[i][r] = t
            if g_bneck[g] >= 0:
                crit[g_bneck[g]] += t - g_start[g]
            if r + 1 < steps[i].repeat:
                push(t, _LAUNCH, i, r + 1)
                continue
            finished[i] = True
            step_end[i] = t
            remaining -= 1
            for dpt in dependents[i]:
                if all(finished[x] for x in steps[dpt].deps) and not dead[dpt]:
                    push(max(step_end[x] for x in steps[dpt].deps) + steps[dpt].delay,
                         _LAUNCH, dpt, 0)
        r_done = pool.compact(g_more if in_kernel else None)
        if r_done:
            grp = r_done["group"]
            bg_alive -= int((grp < 0).sum())
            keep = grp >= 0
            gg = np.maximum(grp, 0)
            r_done["rep"] = g_flat[gg] - off[g_step[gg]]
            if not record_timeline:  # the last repetition of every step
                keep &= r_done["rep"] == step_repeat[g_step[gg]] - 1
            if keep.any():
                rec.append({k: v[keep] for k, v in r_done.items()})
        if record_timeline:
            tl_t.append(t)
            tl_b.append(pool.link_bytes.copy())
            if len(tl_t) > 2 * MAX_SNAPSHOTS:  # cumulative rows: dropping one coarsens only
                tl_t[:] = tl_t[::2] if len(tl_t) % 2 else [*tl_t[::2], tl_t[-1]]
                tl_b[:] = tl_b[::2] if len(tl_b) % 2 else [*tl_b[::2], tl_b[-1]]
    return SimOutput(
        time=float(np.inf if stalled_steps else np.nanmax(step_end, initial=0.0)),
        step_start=step_start, step_end=step_end, rep_start=rep_start, rep_end=rep_end,
        link_bytes=pool.link_bytes.copy(), critical_time=crit,
        stalled_steps=sorted(set(stalled_steps)), stalled_transfers=stalled_tr,
        transfers=_transfers(rec, g_step),
        timeline_t=np.asarray(tl_t), timeline_bytes=(np.vstack(tl_b) if tl_b else
                                                      np.zeros((0, fab.n_links))),
        skipped_epochs=skipped, kernel_calls=calls)


def _transfers(rec: list[dict[str, F8 | I8]], g_step: I8) -> dict[str, F8 | I8]:
    """Per-transfer records (queue pairs of one transfer merged: latest end wins)."""
    if not rec:
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        return {"step": zi, "rep": zi, "transfer": zi, "start": z, "end": z, "nbytes": z}
    grp = np.concatenate([r["group"] for r in rec]).astype(np.int64)
    tag = np.concatenate([r["tag"] for r in rec]).astype(np.int64)
    end = np.concatenate([r["end"] for r in rec]).astype(np.float64)
    size = np.concatenate([r["size"] for r in rec]).astype(np.float64)
    reps = np.concatenate([r["rep"] for r in rec]).astype(np.int64)
    start = np.concatenate([r["start"] for r in rec]).astype(np.float64)
    key = (grp * (int(reps.max()) + 1) + reps) * (int(tag.max()) + 1) + tag
    uniq, inv = np.unique(key, return_inverse=True)
    e = np.full(uniq.shape[0], -np.inf)
    np.maximum.at(e, inv, end)
    nb = np.bincount(inv, weights=size, minlength=uniq.shape[0])
    first = np.zeros(uniq.shape[0], dtype=np.int64)
    first[inv] = np.arange(inv.shape[0])
    g = grp[first]
    s0 = np.full(uniq.shape[0], np.inf)
    np.minimum.at(s0, inv, start)
    return {"step": g_step[g], "rep": reps[first], "transfer": tag[first], "start": s0,
            "end": e, "nbytes": nb}
