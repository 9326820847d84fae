"""``fabricsim sweep`` and ``fabricsim results``: design-space sweeps and their store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from fabricsim.cli.common import JsonOpt, check_out_file, console, print_json
from fabricsim.errors import ConfigError

StoreOpt = Annotated[Path, typer.Option(
    "--store", help="The DuckDB results file (one per study).")]


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep_cmd(
        spec: Annotated[Path, typer.Argument(help="Sweep YAML: base scenario, axes, kind.")],
        store: StoreOpt = Path("results.duckdb"),
        workers: Annotated[int | None, typer.Option(
            "--workers", min=1, max=256, help="Local worker processes (default: one per "
            "CPU, but 1 for sweeps of fewer than 400 points to run).")] = None,
        ray: Annotated[bool, typer.Option(
            "--ray", help="Run the points as Ray tasks (the 'ray' extra): on a local Ray "
            "instance of --workers CPUs, or on --ray-address.")] = False,
        ray_address: Annotated[str | None, typer.Option(
            "--ray-address", help="Address of a running Ray cluster (e.g. ray://head:10001)."
            )] = None,
        time_limit: Annotated[float | None, typer.Option(
            "--time-limit", help="Stop after this many seconds of wall time, keeping every "
            "point done (run the same command again to go on).")] = None,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="No progress bar.")] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Run every point of a sweep not yet in the store (a killed sweep resumes), with a
        progress bar; failed points are stored with their error.

        Example: fabricsim sweep examples/sweeps/tp-pp-70b.yaml --workers 2
        """
        from rich.progress import BarColumn, Progress, TimeRemainingColumn

        from fabricsim.sweeps import load_sweep, run_sweep

        if ray_address and not ray:
            raise ConfigError("--ray-address needs --ray", field="--ray-address")
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f"--time-limit takes seconds > 0, got {time_limit}",
                              field="--time-limit")
        sw = load_sweep(spec)
        with Progress("[progress.description]{task.description}", BarColumn(),
                      "{task.completed}/{task.total}", TimeRemainingColumn(),
                      console=console, disable=as_json or quiet) as bar:
            task = bar.add_task(f"sweep {sw.name}", total=None)

            def tick(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            counts = run_sweep(sw, store, workers=workers, root=spec.parent, progress=tick,
                               ray=ray, ray_address=ray_address, time_limit_s=time_limit)
        if as_json:
            print_json({**counts, "store": str(store)})
            return
        console.print(f"{counts['points']} points: {counts['run']} run now "
                      f"({counts['failed']} failed), {counts['skipped']} already in "
                      f"{store}; see them with fabricsim results {store}")
        for why, n in list(counts["reasons"].items())[:5]:
            console.print(f"[yellow]{n} point{'s' if n > 1 else ''} failed:[/] {escape(why)}")
        if len(counts["reasons"]) > 5:
            console.print(f"... and {len(counts['reasons']) - 5} other reasons (the store's "
                          f"error column has each point's)")
        if counts["stopped"]:
            left = counts["points"] - counts["skipped"] - counts["run"]
            console.print(f"stopped at --time-limit {time_limit:g} s with {left} points to "
                          "go: run the same command again to go on")

    @app.command("results")
    def results_cmd(
        store: Annotated[Path, typer.Argument(help="The DuckDB results file.")] = Path(
            "results.duckdb"),
        sql: Annotated[str | None, typer.Option(
            "--sql", help="A query over table 'points' (default: every row).")] = None,
        columns: Annotated[str | None, typer.Option(
            "--columns", help="Comma-separated columns to show.")] = None,
        parquet: Annotated[Path | None, typer.Option(
            "--parquet", help="Also write the rows to this Parquet file.")] = None,
        pareto: Annotated[str | None, typer.Option(
            "--pareto", help="X,Y: plot Y (higher is better) against X (lower is better) "
            "with the Pareto front, e.g. usd_per_million_tokens,tokens_per_s_per_gpu.")
        ] = None,
        heatmap: Annotated[str | None, typer.Option(
            "--heatmap", help="X,Y,VALUE: VALUE over two axes, e.g. "
            "in__training__tp,in__training__pp,mfu.")] = None,
        scaling: Annotated[str | None, typer.Option(
            "--scaling", help="X,Y[,SERIES]: Y against X, a line per value of SERIES, "
            "e.g. gpus,tokens_per_s_per_gpu,in__cluster__fabric.")] = None,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="PNG file for --pareto, --heatmap or --scaling (default "
            "results.png).")
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Query a sweep's results store: a table, JSON rows, or Parquet.

        Example: fabricsim results results.duckdb --sql "SELECT * FROM points ORDER BY mfu
        DESC LIMIT 5"
        """
        from rich.table import Table

        from fabricsim.sweeps import read_results

        if pareto or heatmap or scaling:
            plot = check_out_file(plot or Path("results.png"), "--plot")
        elif plot is not None:
            raise ConfigError("--plot names the file of a --pareto, --heatmap or --scaling "
                              "chart; give one of them or drop --plot", field="--plot")
        check_out_file(parquet, "--parquet", (".parquet", ".pq"))
        df = read_results(store, sql)
        if sum(x is not None for x in (pareto, heatmap, scaling)) > 1:
            raise ConfigError("one plot at a time: --pareto, --heatmap or --scaling",
                              field="--plot")
        if pareto or heatmap or scaling:
            from fabricsim.plots.sweep import plot_heatmap, plot_pareto, plot_scaling_curves

            assert plot is not None  # set above

            spec = [c.strip() for c in (pareto or heatmap or scaling or "").split(",")]
            ok = df[df["status"] == "ok"] if "status" in df.columns else df
            if pareto:
                if len(spec) != 2:
                    raise ConfigError("give --pareto X,Y (column names)", field="--pareto")
                out = plot_pareto(ok, spec[0], spec[1], plot)
            elif heatmap:
                if len(spec) != 3:
                    raise ConfigError("give --heatmap X,Y,VALUE (column names)",
                                      field="--heatmap")
                out = plot_heatmap(ok, spec[0], spec[1], spec[2], plot)
            else:
                if len(spec) not in (2, 3):
                    raise ConfigError("give --scaling X,Y or X,Y,SERIES (column names)",
                                      field="--scaling")
                out = plot_scaling_curves(ok, spec[0], spec[1], plot,
                                          series=spec[2] if len(spec) == 3 else None)
            if not as_json:
                console.print(f"wrote {out}")
        if columns is not None:
            want = [c.strip() for c in columns.split(",") if c.strip()]
            if not want:
                raise ConfigError("--columns names no column; give e.g. --columns "
                                  "gpus,mfu, or drop it to show them all", field="--columns")
            bad = [c for c in want if c not in df.columns]
            if bad:
                raise ConfigError(f"unknown column(s) {', '.join(bad)}; the store has "
                                  f"{', '.join(map(str, df.columns))}", field="--columns")
            df = df[want]
        if parquet is not None:
            df.to_parquet(parquet)
        if as_json:
            import json

            print_json(json.loads(df.to_json(orient="records")))
            return
        t = Table(title=f"{store} ({len(df)} rows)")
        for c in df.columns:
            t.add_column(str(c), overflow="fold")
        for row in df.itertuples(index=False):
            t.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row])
        console.print(t)
