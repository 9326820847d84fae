"""Jobs run in worker processes, fairly, each within its wall-time budget.

:class:`JobRunner` owns ``limits.workers`` worker processes (started with ``spawn``, so
they share nothing with the server's threads) and one thread per worker that feeds it.
Waiting jobs are kept per client and taken round-robin, so one client's 200 submissions
do not starve another's one. A job that runs past ``limits.max_wall_s`` has its worker
stopped (and a fresh one started); the job fails with the reason. The budget counts from
when the worker takes the job: a fresh worker first imports fabricsim (seconds on a
loaded machine), which no job is charged for. A worker that dies
fails its job the same way; the others go on.

Example
-------
>>> from fabricsim.web.store import JobStore
>>> from fabricsim.web.limits import Limits
>>> runner = JobRunner(JobStore(":memory:"), Limits(workers=1))
>>> jid = runner.submit("describe", ["cluster: {system: dgx-h100, nodes: 1}"], "doc")
>>> runner.wait(jid, timeout=120)["status"]
'done'
>>> runner.close()
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from fabricsim.errors import ConfigError, FabricsimError
from fabricsim.web.limits import Limits
from fabricsim.web.store import JobStore

__all__ = ["Busy", "JobRunner", "error_line"]

#: Progress is sent from a worker at most this often (seconds).
PROGRESS_EVERY_S = 0.2
#: Most seconds a worker may take to start (import fabricsim) and take its job.
WORKER_START_S = 120.0


class Busy(FabricsimError):
    """Too many jobs are waiting (in all, or from this client): try again later."""


def error_line(text: str) -> int | None:
    """The scenario line an error message names (``(line 7)``), if any.

    >>> error_line("training.tp (line 7): Input should be a valid integer")
    7
    >>> error_line("malformed YAML (line 3, column 5): ...")
    3
    """
    import re

    m = re.search(r"\(line (\d+)", text)
    return int(m.group(1)) if m else None


def _worker_main(conn: Connection, limits: Limits) -> None:  # pragma: no cover - child
    """A worker process: run jobs sent over ``conn`` until it is closed."""
    import fabricsim.jobs
    import fabricsim.reports.scenario
    import fabricsim.web.figures  # noqa: F401 - what every job needs, loaded before any job
    from fabricsim.web.jobs import run_job

    last = [0.0]  # when progress was last sent
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        kind, designs = msg
        conn.send(("started",))   # the job's wall-time budget starts now
        last[0] = 0.0

        def progress(frac: float, text: str) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                conn.send(("progress", float(frac), text))

        try:
            conn.send(("done", run_job(kind, designs, limits=limits, progress=progress)))
        except FabricsimError as e:
            conn.send(("error", str(e), e.field))
        except MemoryError:
            conn.send(("crash", "the job ran out of memory; make the design smaller"))
        except Exception as e:  # a bug: reported as such, the worker goes on
            conn.send(("crash", f"internal error ({type(e).__name__}: {e}); please "
                                "report it with the scenario"))


@dataclass
class _Live:
    """In-memory state of a queued or running job (what the events stream reports)."""

    status: str = "queued"
    progress: float = 0.0
    message: str = "queued"
    version: int = 0
    done: threading.Event = field(default_factory=threading.Event)


class _Worker:
    def __init__(self, ctx: Any, limits: Limits) -> None:
        self.ctx, self.limits = ctx, limits
        self.proc: Any = None
        self.conn: Connection | None = None

    def ensure(self) -> Connection:
        if self.proc is None or not self.proc.is_alive() or self.conn is None:
            self.stop()
            parent, child = self.ctx.Pipe()
            self.proc = self.ctx.Process(target=_worker_main, args=(child, self.limits),
                                         daemon=True, name="fabricsim-web-worker")
            self.proc.start()
            child.close()
            self.conn = parent
        return self.conn

    def stop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.close()
            self.conn = None
        if self.proc is not None:
            if self.proc.pid is not None:  # started
                if self.proc.is_alive():
                    self.proc.kill()
                self.proc.join(timeout=5)
            self.proc = None


class JobRunner:
    """Queue, run and record jobs (see the module docs)."""

    def __init__(self, store: JobStore, limits: Limits | None = None, *,
                 start_method: str = "spawn") -> None:
        self.store = store
        self.limits = limits or Limits()
        self._ctx = mp.get_context(start_method)
        self._cond = threading.Condition()
        self._queues: OrderedDict[str, deque[tuple[str, str, list[str]]]] = OrderedDict()
        self._live: dict[str, _Live] = {}
        self._running = 0
        self._closing = False
        self._workers = [_Worker(self._ctx, self.limits) for _ in range(self.limits.workers)]
        for job in store.recover():
            self._enqueue(job["id"], job["kind"], job["designs"], job["client"] or "?")
        self._threads = [threading.Thread(target=self._loop, args=(w,), daemon=True,
                                          name=f"fabricsim-web-{i}")
                         for i, w in enumerate(self._workers)]
        for t in self._threads:
            t.start()

    # -- queue -----------------------------------------------------------------------

    def queued(self) -> int:
        """Jobs waiting."""
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def running(self) -> int:
        """Jobs running."""
        with self._cond:
            return self._running

    def _enqueue(self, job_id: str, kind: str, designs: list[str], client: str) -> None:
        with self._cond:
            self._queues.setdefault(client, deque()).append((job_id, kind, designs))
            self._live[job_id] = _Live()
            self._cond.notify()

    def submit(self, kind: str, designs: Sequence[str], client: str) -> str:
        """Queue a job (its designs already checked); its id. :class:`Busy` when the queue,
        or this client's share of it, is full."""
        with self._cond:
            if self._closing:
                raise Busy("the server is shutting down; try again in a moment")
            total = sum(len(q) for q in self._queues.values())
            mine = len(self._queues.get(client, ()))
            if total >= self.limits.max_queued:
                raise Busy(f"{total} jobs are waiting, the most this server queues "
                           f"(max_queued={self.limits.max_queued}); try again later")
            if mine >= self.limits.max_queued_per_client:
                raise Busy(f"you have {mine} jobs waiting, the most one client may "
                           f"(max_queued_per_client={self.limits.max_queued_per_client}); "
                           "wait for some to finish")
        job_id = uuid.uuid4().hex[:16]
        self.store.add(job_id, kind=kind, designs=list(designs), client=client)
        self._enqueue(job_id, kind, list(designs), client)
        return job_id

    def _next(self) -> tuple[str, str, list[str]] | None:
        with self._cond:
            while not self._closing and not self._queues:
                self._cond.wait()
            if self._closing:
                return None
            client, q = next(iter(self._queues.items()))
            job = q.popleft()
            del self._queues[client]
            if q:  # round-robin: this client goes to the back of the line
                self._queues[client] = q
            self._running += 1
            return job

    # -- state -----------------------------------------------------------------------

    def state(self, job_id: str) -> dict[str, Any] | None:
        """Status, progress and message of a job (live if queued or running)."""
        with self._cond:
            live = self._live.get(job_id)
            if live is not None:
                return {"status": live.status, "progress": live.progress,
                        "message": live.message, "version": live.version}
        row = self.store.get(job_id)
        if row is None:
            return None
        return {"status": row["status"], "progress": row["progress"],
                "message": row["message"], "version": -1}

    def _set(self, job_id: str, **kw: Any) -> None:
        with self._cond:
            live = self._live.get(job_id)
            if live is None:
                return
            for k, v in kw.items():
                setattr(live, k, v)
            live.version += 1

    def _finish(self, job_id: str, status: str, *, result: dict[str, Any] | None = None,
                error: str | None = None, error_field: str | None = None) -> None:
        now = time.time()
        msg = "done" if status == "done" else (error or "failed")
        self.store.update(job_id, status=status, finished=now, progress=1.0,
                          message=msg[:500], error=error, error_field=error_field,
                          error_line=error_line(error) if error else None, result=result)
        with self._cond:
            live = self._live.pop(job_id, None)
            self._running -= 1
        if live is not None:
            live.done.set()

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job ends (or ``timeout``); its row."""
        with self._cond:
            live = self._live.get(job_id)
        if live is not None:
            live.done.wait(timeout)
        row = self.store.get(job_id)
        if row is None:
            raise ConfigError(f"no job {job_id!r}", field="id")
        return row

    # -- workers ---------------------------------------------------------------------

    def _loop(self, worker: _Worker) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            job_id, kind, designs = job
            try:
                self._run(worker, job_id, kind, designs)
            except Exception as e:  # never lose a job to a bug of the runner itself
                worker.stop()
                self._finish(job_id, "failed", error=f"internal error ({type(e).__name__}: "
                                                     f"{e})")

    def _run(self, worker: _Worker, job_id: str, kind: str, designs: list[str]) -> None:
        started = time.time()
        self.store.update(job_id, status="running", started=started, message="starting")
        self._set(job_id, status="running", message="starting")
        conn = worker.ensure()
        conn.send((kind, designs))
        taken = False   # until the worker says it has the job: its start-up, not the job's
        deadline = time.monotonic() + WORKER_START_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0 and not taken:
                worker.stop()
                self._finish(job_id, "failed", error=(
                    f"the worker did not start within {WORKER_START_S:g} s; the server is "
                    f"overloaded: try again later"))
                return
            if left <= 0:
                worker.stop()
                self._finish(job_id, "failed", error=(
                    f"the job ran past the web budget of {self.limits.max_wall_s:g} s wall "
                    f"time and was stopped; make the design smaller, or run it with the CLI "
                    f"(fabricsim {kind}), which has no such limit"), error_field="max_wall_s")
                return
            if self._closing:
                worker.stop()
                return  # left as running: the next start marks it interrupted
            try:
                ready = conn.poll(min(left, 0.5))
                msg = conn.recv() if ready else None
            except (EOFError, OSError):
                worker.stop()
                self._finish(job_id, "failed", error="the worker running this job stopped "
                             "unexpectedly (out of memory?); make the design smaller")
                return
            if msg is None:
                continue
            if msg[0] == "started":
                taken = True
                deadline = time.monotonic() + self.limits.max_wall_s
            elif msg[0] == "progress":
                self._set(job_id, progress=msg[1], message=msg[2])
            elif msg[0] == "done":
                self._finish(job_id, "done", result=msg[1])
                return
            elif msg[0] == "error":
                self._finish(job_id, "failed", error=msg[1], error_field=msg[2])
                return
            else:
                self._finish(job_id, "failed", error=msg[1])
                return

    def close(self) -> None:
        """Stop the workers; queued and running jobs stay in the store for the next
        start (queued ones run then, running ones are marked interrupted)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        for w in self._workers:
            if w.conn is not None:
                with contextlib.suppress(OSError):
                    w.conn.send(None)
            w.stop()
