"""fabricsim: simulate and plan the networks that GPU clusters train and serve models on.

Three things, kept apart: a :class:`Fabric` (where bytes can go), a :class:`Schedule`
(what must be sent) and a :class:`Backend` (how long it takes).

Example
-------
>>> import fabricsim as fs
>>> fab = fs.build_cluster("dgx-h100", nodes=2)
>>> fab.n_gpus
16
"""

from fabricsim.backends import Backend, IdealBackend, Result, get_backend
from fabricsim.catalog import get_catalog
from fabricsim.errors import (
    ConfigError,
    FabricsimError,
    ModelError,
    NoRouteError,
    ScheduleError,
    SimulationError,
    TopologyError,
    UnitError,
    UnknownPresetError,
)
from fabricsim.fabric import Fabric, FabricInfo, LinkKind, NodeKind, build_cluster
from fabricsim.results import frame
from fabricsim.scenario import Scenario, load_scenario
from fabricsim.schedule import Schedule, Step

__version__ = "0.1.0"


def sweep(spec: object, *, store: object = "results.duckdb", workers: int | None = None
          ) -> object:
    """Run a design-space sweep (a :class:`fabricsim.sweeps.SweepSpec`, a mapping of its
    fields, or a sweep YAML path) into the DuckDB ``store`` and return every row of the
    store as a pandas DataFrame (the ``store`` extra). Points already in the store are
    not run again; ``workers`` as in :func:`fabricsim.sweeps.run_sweep`.

    >>> import fabricsim, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> df = fabricsim.sweep({"kind": "bench", "scenario": {"cluster": {"nodes": 2},
    ...     "collective": {"maxbytes": "256MiB"}},
    ...     "axes": {"cluster.fabric": ["ib-ndr", "roce-400g"]}}, store=d / "r.duckdb")
    >>> sorted(df["in__cluster__fabric"]), (df["busbw_gbps"] > 0).all()
    (['ib-ndr', 'roce-400g'], np.True_)
    """
    from pathlib import Path

    from fabricsim.sweeps import load_sweep, read_results, run_sweep, sweep_spec

    root = None
    if isinstance(spec, str | Path):
        path = Path(spec)
        root = path.parent
        sw = load_sweep(path)
    else:
        sw = sweep_spec(spec, field_name="spec")
    out = Path(str(store))
    run_sweep(sw, out, workers=workers, root=root)
    return read_results(out)


__all__ = [
    "Backend",
    "ConfigError",
    "Fabric",
    "FabricInfo",
    "FabricsimError",
    "IdealBackend",
    "LinkKind",
    "ModelError",
    "NoRouteError",
    "NodeKind",
    "Result",
    "Scenario",
    "Schedule",
    "ScheduleError",
    "SimulationError",
    "Step",
    "TopologyError",
    "UnitError",
    "UnknownPresetError",
    "__version__",
    "build_cluster",
    "frame",
    "get_backend",
    "get_catalog",
    "load_scenario",
    "sweep",
]
