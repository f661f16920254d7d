"""`voice-evaluator init DIR [--agent WIRE]`: copy the starter suite so `validate` and `run`
work at once; with ``--agent``, also a tiny agent of the user's own speaking that wire, which the
starter run file launches (``endpoint.launch``)."""

from __future__ import annotations

import argparse
import shutil
from importlib import resources
from pathlib import Path

from .._exit_codes import EXIT_OK
from ..errors import ConfigError
from ._output import PROG, relative

#: The wires ``--agent`` scaffolds a skeleton for (each answers with the caller's own audio).
AGENT_WIRES = ("websocket", "twilio", "pipecat")
#: Below the templates folder: the agent skeletons and their run files (not the starter suite).
_AGENTS = "agents"


def _templates_root() -> Path:
    return Path(str(resources.files("voicelab") / "_templates"))


def template_files() -> list[tuple[Path, Path]]:
    """(absolute source, path relative to the templates folder) for every starter-suite file."""
    root = _templates_root()
    return [(path, path.relative_to(root)) for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".py"
            and path.relative_to(root).parts[0] != _AGENTS]


def agent_files(wire: str) -> list[tuple[Path, Path]]:
    """(source, target name) of the ``--agent WIRE`` skeleton: agent.py, its scenario and
    script, and the run file that launches it (run.yaml, in place of the starter's fake product)."""
    if wire not in AGENT_WIRES:
        raise ConfigError(f"no agent skeleton for {wire!r} (one of: {', '.join(AGENT_WIRES)})",
                          source="CLI", key="--agent")
    agents = _templates_root() / _AGENTS
    return [(agents / f"{wire}.py.tmpl", Path("agent.py")),
            (agents / "scenario-agent.yaml", Path("scenario-agent.yaml")),
            (agents / "script-agent.yaml", Path("script-agent.yaml")),
            (agents / f"run-{wire}.yaml", Path("run.yaml"))]


def init_suite(directory: Path, *, force: bool = False, agent: str | None = None) -> list[Path]:
    """Write the starter suite into ``directory`` (and, with ``agent``, the skeleton of that
    wire: :func:`agent_files`); an existing file is refused unless ``force``."""
    directory = Path(directory)
    extra = agent_files(agent) if agent is not None else []
    replaced = {rel for _, rel in extra}
    files = [(source, rel) for source, rel in template_files() if rel not in replaced] + extra
    clashes = [directory / rel for _, rel in files if (directory / rel).exists()]
    if clashes and not force:
        raise ConfigError(f"{clashes[0]} already exists (use --force to overwrite)",
                          source=str(directory))
    written = []
    for source, rel in files:
        target = directory / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    return written


def init_command(args: argparse.Namespace) -> int:
    written = init_suite(args.directory, force=args.force, agent=args.agent)
    for path in written:
        print(f"created {relative(str(path))}")
    run_file = relative(str(args.directory / "run.yaml"))
    if args.agent is not None:
        print(f"agent: {relative(str(args.directory / 'agent.py'))} speaks {args.agent}; "
              f"run.yaml starts it for every trial (endpoint.launch)")
    print(f"next: {PROG} validate {run_file}")
    return EXIT_OK
