"""`voice-evaluator init DIR`: copy the starter suite so `validate` and `run` work at once."""

from __future__ import annotations

import argparse
import shutil
from importlib import resources
from pathlib import Path

from .._exit_codes import EXIT_OK
from ..errors import ConfigError
from ._output import PROG, relative


def template_files() -> list[tuple[Path, Path]]:
    """(absolute source, path relative to the templates folder) for every template file."""
    root = Path(str(resources.files("voicelab") / "_templates"))
    return [(path, path.relative_to(root)) for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".py"]


def init_suite(directory: Path, *, force: bool = False) -> list[Path]:
    directory = Path(directory)
    files = template_files()
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
    written = init_suite(args.directory, force=args.force)
    for path in written:
        print(f"created {relative(str(path))}")
    print(f"next: {PROG} validate {relative(str(args.directory / 'run.yaml'))}")
    return EXIT_OK
