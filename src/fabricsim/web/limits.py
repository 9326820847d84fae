"""The web app's budgets: what one request, one job and one client may use.

Every limit is a field of :class:`Limits` (``fabricsim serve`` has options for the ones a
deployment changes). A request over a limit gets a 4xx answer naming the limit and the
fix; a job over its wall time is stopped and marked failed with the reason.

Example
-------
>>> lim = Limits()
>>> lim.gpu_cap("bench"), lim.gpu_cap("simulate"), lim.max_wall_s
(16384, 1024, 120.0)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Budgets of the web app (sizes in bytes, times in seconds)."""

    #: Largest request body.
    max_body_bytes: int = 512 * 1024
    #: Time a client has to send a whole request body (a body dribbled byte by byte
    #: would hold a connection open without end).
    body_timeout_s: float = 30.0
    #: Largest scenario text of one design.
    max_scenario_bytes: int = 128 * 1024
    #: GPUs of one design for the analytic kinds (describe, bench, train, scale, plan).
    max_gpus: int = 16_384
    #: GPUs of one design for a flow-level ``simulate`` job.
    max_gpus_flow: int = 1_024
    #: Point-to-point transfers of one flow-level all-to-all (n(n-1) for n ranks; a
    #: 1,024-rank all-to-all is 1,047,552 and grew a worker to 1.7 GiB).
    max_flow_transfers: int = 262_144
    #: GPUs of one design for a ``packet`` job (its event budget also applies).
    max_gpus_packet: int = 512
    #: Message sizes of one ``bench`` curve (nccl-tests' 8 B to 1 GiB is 28).
    max_sizes: int = 40
    #: Packet variants run by one job.
    max_variants: int = 6
    #: Wall time of one job from when its worker takes it; past it the worker is stopped
    #: and the job fails.
    max_wall_s: float = 120.0
    #: Jobs running at once (worker processes).
    workers: int = 2
    #: Jobs waiting, in all, and per client.
    max_queued: int = 1_000
    max_queued_per_client: int = 250

    def gpu_cap(self, kind: str) -> int:
        """Most GPUs one design of a ``kind`` job may have."""
        if kind == "simulate":
            return self.max_gpus_flow
        if kind == "packet":
            return self.max_gpus_packet
        return self.max_gpus
