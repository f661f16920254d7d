"""The package layout keeps its dependency directions (docs: ARCHITECTURE.md, package map).

Test doubles live in ``voicelab.doubles`` and may import the core (the real adapters they are
reached through); the core reaches them only through the name registries (``adapter: fake``),
never by importing them. Only the CLI and ``python -m voicelab`` import ``voicelab.cli``.
Imports are read with ``ast``, so an import inside a function counts too. ``runner`` (one trial,
its scoring, what a run reports) and ``execution`` (where trials run, runs of many trials) import
no cycle, execution builds on the runner and never the reverse, and both use other packages
through the names their ``__init__`` exports.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

import voicelab
from voicelab.endpoints import ENDPOINTS
from voicelab.scoring._probe_loader import PROBES

PACKAGE_DIR = Path(voicelab.__file__).parent
DOUBLES = "voicelab.doubles"
CLI = "voicelab.cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names; for
    ``from package import name`` both ``package`` and ``package.name`` (it may be a module)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


MODULES = {module_name(path): imported_modules(path)
           for path in sorted(PACKAGE_DIR.rglob("*.py")) if "__pycache__" not in path.parts}


def test_the_scan_sees_the_package_and_resolves_relative_imports():
    assert "voicelab.runner._run" in MODULES and "voicelab.doubles.product._endpoint" in MODULES
    # doubles are reached through the production adapters (relative imports, resolved)
    assert "voicelab.endpoints.websocket" in MODULES["voicelab.doubles.product._endpoint"]
    assert "voicelab.doubles.product" in MODULES["voicelab.doubles.demo_agent._endpoint"]


def test_nothing_outside_doubles_imports_a_double():
    offenders = {module: sorted(m for m in imports if is_within(m, DOUBLES))
                 for module, imports in MODULES.items() if not is_within(module, DOUBLES)}
    assert {module: found for module, found in offenders.items() if found} == {}


def test_only_the_command_line_imports_the_cli():
    allowed = {"voicelab.__main__"}
    offenders = {module: sorted(m for m in imports if is_within(m, CLI))
                 for module, imports in MODULES.items()
                 if not is_within(module, CLI) and module not in allowed}
    assert {module: found for module, found in offenders.items() if found} == {}


def test_endpoints_holds_no_server():
    # a server on 127.0.0.1 imitates a product or a service: it is a double, not an adapter
    servers = ("websockets.asyncio.server", "websockets.server", "http.server", "socketserver")
    offenders = {module: sorted(m for m in imports if any(is_within(m, s) for s in servers))
                 for module, imports in MODULES.items() if is_within(module, "voicelab.endpoints")}
    assert {module: found for module, found in offenders.items() if found} == {}


@pytest.mark.parametrize(("registry", "name", "target"), [
    (ENDPOINTS, "fake", "voicelab.doubles.product:FakeProductEndpoint"),
    (ENDPOINTS, "local_agent", "voicelab.doubles.demo_agent:LocalAgentEndpoint"),
    (PROBES, "fake", "voicelab.doubles.product:FakeProductProbe"),
])
def test_the_registries_reach_the_doubles_by_name(registry, name, target):
    # with no import of a double outside voicelab.doubles, a registry name is the only way in
    resolved = registry.resolve(name)
    assert f"{resolved.__module__.rpartition('.')[0]}:{resolved.__name__}" == target


# --- runner and execution: one direction, no cycle, other packages by their public names ---------

RUNNER, EXECUTION = "voicelab.runner", "voicelab.execution"


def _in_runner_or_execution(module: str) -> bool:
    return is_within(module, RUNNER) or is_within(module, EXECUTION)


def _module_graph(within: Callable[[str], bool]) -> dict[str, set[str]]:
    """The modules ``within`` selects and those of them each imports (anywhere in it: an
    import inside a function is an edge as much as one at the top)."""
    return {module: {m for m in imports if m in MODULES and within(m) and m != module}
            for module, imports in MODULES.items() if within(module)}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_closed_inside_a_function():
    # what an import inside a function used to hide: _worker -> _run at call time
    graph = {"a._run": {"a._executors"}, "a._executors": {"a._worker"}, "a._worker": {"a._run"},
             "a._child": set()}
    assert cycles(graph) == [["a._executors", "a._run", "a._worker"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_runner_and_execution_modules_import_no_cycle():
    assert "voicelab.execution._run" in MODULES and "voicelab.runner._trial" in MODULES
    assert cycles(_module_graph(_in_runner_or_execution)) == []


def test_the_runner_does_not_know_where_trials_run():
    # execution builds on the runner (one trial, its scoring, a run's report), never the reverse
    offenders = {module: sorted(m for m in imports if is_within(m, EXECUTION))
                 for module, imports in MODULES.items() if is_within(module, RUNNER)}
    assert {module: found for module, found in offenders.items() if found} == {}


def _private_module_of_another_package(module: str, imported: str) -> bool:
    """``imported`` is a private module (a ``_name`` below ``voicelab.<package>``) of another
    package than ``module``'s. The root package's own modules (``voicelab._validate``) are the
    project's shared internals."""
    parts = imported.split(".")
    return (imported in MODULES and len(parts) >= 3
            and not is_within(module, ".".join(parts[:2]))
            and any(part.startswith("_") for part in parts[2:]))


def test_packages_use_each_other_by_their_public_names():
    # the doubles imitate things from the outside and may reach into what they imitate
    found = sorted((module, imported) for module, imports in MODULES.items()
                   if not is_within(module, DOUBLES)
                   for imported in imports if _private_module_of_another_package(module, imported))
    assert found == []


def test_the_private_import_rule_sees_a_reach_in():
    assert _private_module_of_another_package("voicelab.execution._dask",
                                              "voicelab.artifacts._store")
    assert not _private_module_of_another_package("voicelab.execution._dask",
                                                  "voicelab.execution._child")
    assert not _private_module_of_another_package("voicelab.execution._dask", "voicelab.artifacts")
    assert not _private_module_of_another_package("voicelab.execution._run", "voicelab._validate")


def test_only_the_inline_executor_knows_the_scoring_process():
    scoring_process = f"{EXECUTION}._scoring_process"
    users = sorted(module for module, imports in MODULES.items() if scoring_process in imports)
    assert users == [f"{EXECUTION}._scorer"]
    scorer_users = sorted(module for module, imports in MODULES.items()
                          if f"{EXECUTION}._scorer" in imports)
    assert scorer_users == [f"{EXECUTION}._inline"]


def test_the_packages_import_no_cycle():
    """Between packages (each subpackage of voicelab, and the root's own modules) the imports
    run one way: a package's modules never need one that needs it back."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, imports in MODULES.items():
        graph.setdefault(package(module), set()).update(
            package(m) for m in imports if m in MODULES and package(m) != package(module))
    assert cycles(graph) == []
