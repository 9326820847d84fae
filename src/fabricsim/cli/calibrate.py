"""``fabricsim calibrate``: fit the model to a cluster's nccl-tests logs, write a scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fabricsim.cli.common import JsonOpt, SystemOpt, check_out_file, console, print_json
from fabricsim.errors import ConfigError


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        logs: Annotated[list[Path], typer.Argument(
            help="nccl-tests logs of this cluster (any collectives, sizes and node counts).")],
        output: Annotated[Path | None, typer.Option(
            "--output", "-o", help="Write the calibrated cluster as a scenario YAML that "
            "every command accepts.")] = None,
        system: SystemOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Fit per-class efficiency and per-step overhead factors to the logs (every other
        size fitted, the rest held out), report the error before and after on both, and
        write a scenario whose cluster carries the calibration.

        Example: fabricsim calibrate all_reduce_perf.log all_gather_perf.log -o my.yaml
        """
        from dataclasses import replace

        import yaml

        from fabricsim.cli.compare import log_release, read_log_files, system_for_logs
        from fabricsim.interop.calibrate import calibrate

        check_out_file(output, "--output", suffixes=(".yaml", ".yml"))
        # each test timed with NCCL's choice as the release its log names makes it
        files = []
        for p, tests in read_log_files(logs):
            release = log_release(next((t.nccl_version for t in tests), None), p.name)
            files.append((p, [replace(t, nccl_version=release) for t in tests if t.rows]))
        blind = next((p for p, tests in files for t in tests if not t.hosts), None)
        if blind is not None:
            raise ConfigError(f"{blind.name} has result rows but no 'Using devices' list, so "
                              "its ranks and servers are unknown; give nccl-tests' full "
                              "output (fabricsim bench --json rows do not carry them)",
                              field="LOGS")
        system = system_for_logs(files, system, one="a calibration fits one system: "
                                 "calibrate the logs of each GPU separately")
        res = calibrate([t for _, tests in files for t in tests], system=system)
        write = output is not None and bool(res.determined)
        if write and output is not None:
            output.write_text(yaml.safe_dump(res.scenario(output.stem), sort_keys=False),
                              encoding="utf-8")
        if as_json:
            print_json({**res.as_dict(), "output": str(output) if write else None})
            _nothing_written(res, output)
            return
        console.print(f"calibrated {system} on {res.fitted_rows} rows, checked on "
                      f"{res.held_out_rows} held out")
        for k, v in res.factors.items():
            se = res.stderr.get(k)
            if k in res.undetermined:
                console.print(f"  {k:<18} not determined by these logs (left at 1)")
            else:
                console.print(f"  {k:<18} {v:.3f}" + (f" ± {se:.3f}" if se is not None
                                                        else ""))
        console.print(f"median |time error|: fitted {res.fit_error_before:.1%} -> "
                      f"{res.fit_error_after:.1%}; held out {res.held_out_error_before:.1%}"
                      f" -> {res.held_out_error_after:.1%}")
        for n in res.notes:
            console.print(f"note: {n}")
        if res.undetermined:
            from fabricsim.interop.calibrate import COLLECT

            which = "the others" if res.determined else "them"
            console.print(f"to determine {which}, collect:")
            for k in res.undetermined:
                console.print(f"  {k:<18} {COLLECT.get(k, '')}")
        if write:
            console.print(f"wrote {output} (use it as the scenario of any command, e.g. "
                          f"fabricsim bench all_reduce {output})")
        _nothing_written(res, output)


def _nothing_written(res: Any, output: Path | None) -> None:
    """A calibration that determines nothing writes no file, and says so (exit 2)."""
    if output is not None and not res.determined:
        raise ConfigError(f"no factor is determined by these logs, so {output} was not "
                          f"written (it would change nothing); collect the runs listed "
                          f"above and calibrate again", field="LOGS")
