"""No two modules of archbench import each other, directly or through others.

The graph is read from the source with `ast`, not by importing it: every `import` and
`from ... import` of an archbench module counts, at module level and inside functions alike (an
import deferred into a function still ties the two modules together; deferring it only hides the
cycle until that function runs). Relative imports are resolved against the importing module's
package. Imports under `if TYPE_CHECKING:` never run and are left out.

An edge goes to the module a statement names: `from archbench.a import b` is an edge to
`archbench.a.b` when `b` is a submodule and to `archbench.a` otherwise. Importing
`archbench.a.b` also runs the package `archbench.a` (its __init__.py) first, so that is an edge
too, except where the importing module lies inside that package (Python has initialised it
already).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "archbench"


def module_files() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    files: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in `nodes`, at any depth, except those under TYPE_CHECKING."""
    for node in nodes:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_nodes(node.orelse)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            yield from _import_nodes(ast.iter_child_nodes(node))


def _absolute(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a `from` statement names, its relative form resolved."""
    if node.level == 0:
        return node.module or ""
    package = name if _is_package(path) else name.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The archbench modules that module `name` (read from `path`) imports."""
    found: set[str] = set()
    for node in _import_nodes([ast.parse(path.read_text(encoding="utf-8"))]):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            module = _absolute(name, path, node)
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                for alias in node.names
            ]
        found.update(t for t in targets if t in known)
    found.update(package for target in list(found) for package in _packages_of(target, known))
    found -= {name, *_packages_of(name, known)}
    return found


def _packages_of(name: str, known: set[str]) -> list[str]:
    """The packages Python initialises before module `name`, outermost first."""
    parts = name.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in known]


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative, so a long import chain cannot reach the recursion limit
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(found)


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One concrete cycle through the component's first module, for the failure message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return paths[node] + [start]
            if target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    return component


def test_the_scan_sees_the_whole_package():
    graph = import_graph()
    assert "archbench.common.archs" in graph
    assert "archbench.analysis.report" in graph
    assert "archbench.runtime.settings" in graph["archbench.runtime.config"]
    # a relative import and a function-level one are both read
    assert any(graph[name] for name in graph if name.startswith("archbench.analysis."))


def test_relative_imports_resolve_against_the_package(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from . import sibling\nfrom ..other import thing\n", encoding="utf-8")
    known = {"archbench.sub.sibling", "archbench.other", "archbench.sub.mod"}
    assert imports_of("archbench.sub.mod", source, known) == {
        "archbench.sub.sibling",
        "archbench.other",
    }


def test_importing_a_submodule_runs_its_package_first(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text(
        "from archbench.pkg.sub import thing\nimport archbench.here.other\n", encoding="utf-8"
    )
    known = {"archbench", "archbench.pkg", "archbench.pkg.sub", "archbench.here"}
    known |= {"archbench.here.mod", "archbench.here.other"}
    # archbench and archbench.here are already initialised when archbench.here.mod runs
    assert imports_of("archbench.here.mod", source, known) == {
        "archbench.pkg",
        "archbench.pkg.sub",
        "archbench.here.other",
    }


def test_function_level_imports_count_and_type_checking_ones_do_not(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from archbench.a import A\n"
        "def f():\n"
        "    import archbench.b\n",
        encoding="utf-8",
    )
    known = {"archbench.a", "archbench.b", "archbench.mod"}
    assert imports_of("archbench.mod", source, known) == {"archbench.b"}


def test_no_import_cycles():
    graph = import_graph()
    cycles = [
        f"{' -> '.join(_cycle_in(c, graph))} (every module of the loop: {', '.join(c)})"
        for c in strongly_connected(graph)
    ]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


# What the record, the data contract, may import: itself and these leaves (the settings table,
# the architectures, link rates, phase names, errors, bounded JSON). What a run says about its
# machine is gathered above it (archbench.runtime.environment) and passed in. The two packages
# count because importing a module of theirs runs their __init__, which imports nothing.
RECORD_FLOOR = {
    "archbench.runtime.settings", "archbench.common.archs", "archbench.common.bandwidth",
    "archbench.runtime.phases", "archbench.common.errors", "archbench.common.jsonl",
    "archbench.common", "archbench.runtime",
}  # fmt: skip


def test_the_record_imports_nothing_above_its_floor():
    graph = import_graph()
    assert graph["archbench.common"] == set() and graph["archbench.runtime"] == set()
    record = {
        name for name in graph if name == "archbench.record" or name.startswith("archbench.record.")
    }
    assert len(record) >= 6, record  # the scan sees the package
    climbing = {
        f"{name} -> {target}"
        for name in sorted(record)
        for target in graph[name] - record - RECORD_FLOOR
    }
    assert not climbing, sorted(climbing)


# The modules outside archbench.cluster that may import it, each a command or backend that brings
# up, inspects or prices a cluster; the run path (train, loop, trainers, timeline, the measuring
# ranks, the record) reaches the emulator only through archbench.runtime.emulation.
CLUSTER_USERS = {
    "archbench.runtime.emulation": "the run path's one door to the emulator",
    "archbench.sweep.emulated": "the emulated cluster kind: brings it up and down for a study",
    "archbench.sweep.kinds.emulated": "the emulated kind: whether it can be built, is up",
    "archbench.sweep.spec": "checks a study's cluster: block against the emulator's limits",
    "archbench.doctor.cli": "`archbench doctor`: whether an emulated cluster is up",
    "archbench.init.hosts": "`archbench init`: the hosts of an emulated cluster that is up",
    "archbench.perfmodel.measure.microbench": "`archbench microbench`: the link it measures on",
    "archbench.perfmodel.measure.calibration": "which cluster a calibration was measured on",
    "archbench.perfmodel.model.units": "`--bandwidth current`: the link of the cluster that is up",
}


def test_the_emulator_is_reached_only_through_its_door():
    graph = import_graph()
    reaching = {
        name: sorted(
            t for t in targets if t == "archbench.cluster" or t.startswith("archbench.cluster.")
        )
        for name, targets in graph.items()
        if not (name == "archbench.cluster" or name.startswith("archbench.cluster."))
    }
    reaching = {name: targets for name, targets in reaching.items() if targets}
    assert "archbench.runtime.emulation" in reaching, reaching  # the scan sees the door
    assert set(reaching) <= set(CLUSTER_USERS), sorted(set(reaching) - set(CLUSTER_USERS))
    # The door imports the emulator only when asked (inside its functions), so that importing
    # it costs a rank on real hosts nothing.
    tree = ast.parse((PACKAGE / "runtime" / "emulation.py").read_text(encoding="utf-8"))
    top_level = [
        node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
        and "archbench.cluster" in ast.unparse(node)
    ]  # fmt: skip
    assert top_level == [], [ast.unparse(node) for node in top_level]


# The packages that answer a command (a study, a check of hosts, the emulator, the performance
# model, the report): above the run path, which trains one run and writes its record.
COMMAND_PACKAGES = {
    "sweep",
    "doctor",
    "init",
    "cluster",
    "perfmodel",
    "analysis",
    "cli",
    "bench",
    "info",
}


def test_the_run_path_imports_no_command_above_it():
    """config, launch, loop, train, the trainers, the workloads, the timeline and the record
    import none of the command packages (the emulator only through its door), so a rank loads
    what a run needs and no import climbs back up."""
    graph = import_graph()

    def unit(name: str) -> str:
        parts = name.split(".")
        return parts[1] if len(parts) > 1 else ""

    run_path = [name for name in graph if unit(name) and unit(name) not in COMMAND_PACKAGES]
    assert "archbench.runtime.loop" in run_path and "archbench.timeline.tracer" in run_path
    climbing = sorted(
        f"{name} -> {target}"
        for name in run_path
        if name != "archbench.runtime.emulation"
        for target in graph[name]
        if unit(target) in COMMAND_PACKAGES
    )
    assert climbing == [], climbing


def test_the_checks_of_hosts_import_nothing_of_the_sweep():
    """The sweep makes doctor's cheap checks before its first run (archbench.doctor.quick), so
    those checks sit below it: of the doctor package only its command (doctor.cli, which reads a
    study) imports the sweep."""
    graph = import_graph()
    doctor = [name for name in graph if name.startswith("archbench.doctor.")]
    assert "archbench.doctor.quick" in graph["archbench.sweep.preflight"], "the scan sees the use"
    climbing = sorted(
        f"{name} -> {target}"
        for name in doctor
        if name != "archbench.doctor.cli"
        for target in graph[name]
        if target == "archbench.sweep" or target.startswith("archbench.sweep.")
    )
    assert climbing == [], climbing
