"""The package layout keeps its dependency directions (docs: ARCHITECTURE.md, package map).

Test doubles live in ``voicelab.doubles`` and may import the core (the real adapters they are
reached through); the core reaches them only through the name registries (``adapter: fake``),
never by importing them. Only the CLI and ``python -m voicelab`` import ``voicelab.cli``.
Imports are read with ``ast``, so an import inside a function counts too.
"""

from __future__ import annotations

import ast
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
    assert "voicelab.endpoints._websocket" in MODULES["voicelab.doubles.product._endpoint"]
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
