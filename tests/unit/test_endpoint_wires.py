"""``voicelab/endpoints/`` shows which wires exist: one subpackage per wire, each built-in
adapter inside its wire's subpackage, what the wires share at the top, and no wire leaning on
another (a new wire, SIP or WebRTC, is a new folder that touches no other)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import voicelab.endpoints
from voicelab.endpoints import ENDPOINTS

ENDPOINTS_DIR = Path(voicelab.endpoints.__file__).parent
WIRES = ("websocket", "http", "realtime", "twilio", "pipecat", "sip", "webrtc")


def imported_modules(path: Path, package: str) -> set[str]:
    """Absolute names of what ``path`` (a module of ``package``) imports, relative ones resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)] \
                if node.level else []
            source = ".".join([*base, node.module] if node.module else base)
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_every_wire_is_a_subpackage_and_nothing_else_is() -> None:
    subpackages = sorted(p.name for p in ENDPOINTS_DIR.iterdir() if (p / "__init__.py").exists())
    assert subpackages == sorted(WIRES)


@pytest.mark.parametrize("wire", WIRES)
def test_the_built_in_adapter_lives_in_its_wire(wire: str) -> None:
    adapter = ENDPOINTS.resolve(wire)
    assert adapter.__module__.startswith(f"voicelab.endpoints.{wire}.")


@pytest.mark.parametrize("wire", WIRES)
def test_a_wire_imports_no_other_wire(wire: str) -> None:
    others = {f"voicelab.endpoints.{other}" for other in WIRES if other != wire}
    for path in (ENDPOINTS_DIR / wire).glob("*.py"):
        package = f"voicelab.endpoints.{wire}"
        leaning = {m for m in imported_modules(path, package)
                   if any(m == o or m.startswith(o + ".") for o in others)}
        assert leaning == set(), path.name


def test_what_the_wires_share_imports_no_wire() -> None:
    wires = {f"voicelab.endpoints.{wire}" for wire in WIRES}
    for path in ENDPOINTS_DIR.glob("*.py"):
        leaning = {m for m in imported_modules(path, "voicelab.endpoints")
                   if any(m == w or m.startswith(w + ".") for w in wires)}
        assert leaning == set(), path.name
