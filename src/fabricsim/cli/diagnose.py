"""``fabricsim diagnose``: rank suspect hosts and links from pairwise nccl-tests logs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fabricsim.cli.common import (
    FabricOpt,
    JsonOpt,
    SystemOpt,
    TopologyOpt,
    console,
    print_json,
)
from fabricsim.errors import ConfigError


def register(app: typer.Typer) -> None:
    @app.command("diagnose")
    def diagnose_cmd(
        logs: Annotated[list[Path], typer.Argument(
            help="nccl-tests logs of runs between two servers (one or more tests each).")],
        system: SystemOpt = None,
        fabric: FabricOpt = None,
        topology: TopologyOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Which host or link is bad: each two-host run is compared with the model of a
        healthy cluster, and the slowdowns are solved over the hosts and links the runs
        cross (docs/cli.md). Failed runs count as evidence.

        Example: fabricsim diagnose pair-*.log --system dgx-h100
        """
        from fabricsim.catalog import get_catalog
        from fabricsim.cli.compare import read_log_files, system_for_logs
        from fabricsim.fabric import build_cluster
        from fabricsim.interop.diagnose import diagnose, runs_from_tests

        files = read_log_files(logs, warn=False)
        tests = [t for _, ts in files for t in ts]
        runs, skipped = runs_from_tests(tests)
        for skip in skipped:
            typer.echo(f"warning: skipped {skip}", err=True)
        if not runs:
            raise ConfigError("none of the logs is a run between two hosts; diagnose reads "
                              "pairwise runs (nccl-tests with ranks on exactly two hosts)",
                              field="LOGS")
        system = system_for_logs(files, system, one="diagnose models one cluster of one "
                                 "system: give the logs of servers with the same GPU")
        hosts = {h for r in runs for h in r.hosts}
        fab = build_cluster(system, max(len(hosts), 2), fabric=fabric, topology=topology,
                            catalog=get_catalog())
        rep = diagnose(runs, fabric=fab)
        if as_json:
            print_json({**rep.as_dict(), "system": system, "hosts": len(hosts),
                        "skipped": skipped})
            return
        console.print(f"{len(runs)} two-host runs over {len(hosts)} hosts, modelled as "
                      f"{system} on {fab.info.fabric}; the typical run is "
                      f"{rep.baseline_ratio:.2f}x the model's time")
        if not rep.suspects:
            console.print(f"[green]no suspect:[/] {rep.why}")
            return
        for i, s in enumerate(rep.suspects[:5], 1):
            also = f" (indistinguishable from {', '.join(s.also[:3])}" + \
                (f" and {len(s.also) - 3} more)" if len(s.also) > 3 else ")") if s.also else ""
            console.print(f"{i}. [bold]{s.component}[/]{also}: runs through it "
                          f"{s.slowdown:.0%} slower ({len(s.slow_runs)} slow, "
                          f"{len(s.failed_runs)} failed of {s.runs})")
            for pair, frac in s.slow_runs[:3]:
                console.print(f"     {pair}: {frac:+.0%}")
            for pair in s.failed_runs[:3]:
                console.print(f"     {pair}: failed")
        if not rep.identified:
            console.print(f"[yellow]not conclusive:[/] {rep.why}")
        for n in rep.notes:
            console.print(f"note: {n}")
