"""Layers depend one way (docs/architecture.md): a module never imports a layer above it,
and no module imports another package's private names. Checked on the source's imports
(including those inside functions), so a lazy import cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "fabricsim"

#: Collective algorithms: pure schedule builders, below the backends.
ALGORITHMS = ("fabricsim.collectives.registry", "fabricsim.collectives.busbw",
              "fabricsim.collectives.ring", "fabricsim.collectives.tree",
              "fabricsim.collectives.alltoall", "fabricsim.collectives.halving_doubling",
              "fabricsim.collectives.hierarchical", "fabricsim.collectives.nvls",
              "fabricsim.collectives.sharp")
#: Above the jobs layer: the faces and what they use to present a report.
_FACES = ("fabricsim.sweeps", "fabricsim.reports", "fabricsim.plots", "fabricsim.interop",
          "fabricsim.cli", "fabricsim.web")
_TOP = ("fabricsim.workloads", "fabricsim.scenario", "fabricsim.jobs", *_FACES)
_ABOVE_WORKLOADS = ("fabricsim.scenario", "fabricsim.jobs", *_FACES)
_MODEL = ("fabricsim.protocols", "fabricsim.backends", "fabricsim.collectives", *_TOP)

#: module prefix -> prefixes it must not import (the longest matching prefix rules)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "fabricsim.errors": ("fabricsim.",),
    "fabricsim.units": ("fabricsim.catalog", "fabricsim.fabric", *_MODEL),
    "fabricsim.transport": ("fabricsim.catalog", "fabricsim.fabric", *_MODEL),
    "fabricsim.catalog": ("fabricsim.fabric", "fabricsim.schedule", *_MODEL),
    "fabricsim.fabric": ("fabricsim.schedule", *_MODEL),
    "fabricsim.schedule": _MODEL,
    "fabricsim.protocols": ("fabricsim.backends", "fabricsim.collectives", *_TOP),
    **{a: ("fabricsim.backends", "fabricsim.collectives.tuner", "fabricsim.collectives.api",
           *_TOP) for a in ALGORITHMS},
    "fabricsim.backends": ("fabricsim.collectives", *_TOP),
    "fabricsim.collectives.tuner": _TOP,
    "fabricsim.collectives.api": _TOP,
    "fabricsim.collectives": _TOP,
    "fabricsim.workloads": _ABOVE_WORKLOADS,
    # workloads: a shared base (models, flops, gpu rates, comm) under training and serving,
    # which do not import each other; cost (capex, fabric plans) sits on training
    **{f"fabricsim.workloads.{m}": ("fabricsim.workloads.training",
                                    "fabricsim.workloads.serving", "fabricsim.workloads.cost",
                                    *_ABOVE_WORKLOADS)
       for m in ("models", "flops", "gpu", "comm")},
    "fabricsim.workloads.training": ("fabricsim.workloads.serving",
                                     "fabricsim.workloads.cost", *_ABOVE_WORKLOADS),
    "fabricsim.workloads.serving": ("fabricsim.workloads.training",
                                    "fabricsim.workloads.cost", *_ABOVE_WORKLOADS),
    # a scenario is read into typed sections once; the jobs layer above turns it into jobs
    "fabricsim.scenario": ("fabricsim.jobs", *_FACES),
    # one run(job, fabric) per kind: every face (CLI, web, sweeps, reports) calls it
    "fabricsim.jobs": _FACES,
    # plots draw numbers they are given; reports call them (never the other way round)
    "fabricsim.plots": ("fabricsim.cli", "fabricsim.reports", "fabricsim.web"),
    "fabricsim.reports": ("fabricsim.cli", "fabricsim.web"),
    "fabricsim.interop": ("fabricsim.sweeps", "fabricsim.cli", "fabricsim.reports",
                          "fabricsim.plots", "fabricsim.web"),
    "fabricsim.sweeps": ("fabricsim.cli", "fabricsim.reports", "fabricsim.plots",
                         "fabricsim.web"),
    # the web app sits beside the CLI: both on top, neither imports the other
    "fabricsim.web": ("fabricsim.cli",),
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def _rule(module: str) -> tuple[str, ...]:
    keys = [k for k in FORBIDDEN if module == k or module.startswith(k + ".")]
    return FORBIDDEN[max(keys, key=len)] if keys else ()


def _hits(target: str, prefixes: tuple[str, ...]) -> bool:
    return any(target == p.rstrip(".") or target.startswith(p if p.endswith(".") else p + ".")
               for p in prefixes)


def test_layers_import_downward_only() -> None:
    bad = []
    for mod, path in _modules().items():
        forbidden = _rule(mod)
        for target, _ in _imports(path):
            if target.startswith("fabricsim") and _hits(target, forbidden):
                bad.append(f"{mod} imports {target}")
    assert not bad, "\n".join(sorted(bad))


def test_no_private_name_crosses_packages() -> None:
    bad = []
    for mod, path in _modules().items():
        pkg = ".".join(mod.split(".")[:2])
        for target, names in _imports(path):
            if not target.startswith("fabricsim.") or target.startswith(pkg + ".") or \
                    target == pkg:
                continue
            bad += [f"{mod} imports {target}.{n}" for n in names
                    if n.startswith("_") and not n.startswith("__")]
    assert not bad, "\n".join(sorted(bad))


#: Packages whose own import cycles are being removed by their rewrite (scenario.schema,
#: rules and fabric import one another); a cycle anywhere else fails. Drop an entry once
#: its package has none.
CYCLES_BEING_REMOVED: tuple[str, ...] = ()


def _graph() -> dict[str, set[str]]:
    """Module -> the fabricsim modules it imports (``from pkg import sub`` names ``sub``)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        out: set[str] = set()
        for target, names in _imports(path):
            subs = {f"{target}.{n}" for n in names} & mods.keys()
            out |= subs
            if len(subs) < max(len(names), 1):
                out.add(target)
        graph[mod] = (out & mods.keys()) - {mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import path ``a -> ... -> a`` for every module that reaches itself."""
    out: list[list[str]] = []
    for start in sorted(graph):
        back = {start: ""}
        todo = [start]
        while todo:
            node = todo.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(back[path[-1]])
                    out.append([start, *reversed(path[:-1]), start])
                    todo = []
                    break
                if nxt not in back:
                    back[nxt] = node
                    todo.append(nxt)
    return out


def test_no_import_circles() -> None:
    """Two modules that import each other (lazily or not) are one module split in two, or a
    helper living in the wrong one: move what both need to a module below them."""
    bad = [" -> ".join(c) for c in _cycles(_graph())
           if not all(m.startswith(CYCLES_BEING_REMOVED) for m in c)]
    assert not bad, "\n".join(bad)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_package_imports_round_a_circle() -> None:
    """Packages (``fabricsim.<name>``) depend one way too, even where no two modules form
    a circle: e.g. reports call plots, so plots never import reports."""
    graph: dict[str, set[str]] = {}
    for mod, targets in _graph().items():
        graph.setdefault(_package(mod), set()).update(
            _package(t) for t in targets if _package(t) != _package(mod))
    bad = [" -> ".join(c) for c in _cycles(graph)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_violation() -> None:
    assert _hits("fabricsim.workloads.training.step",
                 _rule("fabricsim.workloads.serving.instance"))
    assert not _hits("fabricsim.workloads.gpu", _rule("fabricsim.workloads.serving.instance"))
    assert _hits("fabricsim.backends.analytic", _rule("fabricsim.collectives.ring"))
    assert not _hits("fabricsim.backends.analytic", _rule("fabricsim.collectives.tuner"))
    assert _hits("fabricsim.collectives.ring", _rule("fabricsim.backends.flow.sim"))
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c", "a"], ["b", "c", "a", "b"], ["c", "a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: The floors a typed job passes through from a file or a flag to a backend.
TYPED_FLOORS = ("scenario", "jobs", "workloads")


def _loose(node: ast.expr | None) -> bool:
    """An annotation that lets anything through: a mapping of strings to ``Any``."""
    text = ast.unparse(node) if node is not None else ""
    return any(f"{m}[str, Any]" in text for m in ("dict", "Mapping", "MutableMapping"))


def test_no_loose_dicts_on_the_path_to_a_backend() -> None:
    """Sections, jobs and workloads take typed inputs: no public function or method of
    theirs has a parameter typed as a mapping of strings to Any, and none returns one
    beside its result (the old ``(model, cfg, extra)``)."""
    bad = []
    for floor in TYPED_FLOORS:
        for path in sorted((SRC / floor).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                    continue
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                bad += [f"{path.relative_to(SRC)}:{node.lineno} {node.name}({a.arg})"
                        for a in args if _loose(a.annotation)]
                ret = node.returns
                if isinstance(ret, ast.Subscript) and ast.unparse(ret.value) == "tuple" \
                        and _loose(ret.slice):
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} returns "
                               f"{ast.unparse(ret)}")
    assert not bad, "\n".join(bad)


def test_the_loose_dict_check_sees_one() -> None:
    f = ast.parse("def f(extra: dict[str, Any]) -> tuple[int, dict[str, Any]]: ...").body[0]
    assert isinstance(f, ast.FunctionDef)
    assert _loose(f.args.args[0].annotation) and _loose(f.returns)
    assert not _loose(ast.parse("x: Mapping[str, object]").body[0].annotation)  # type: ignore[attr-defined]
