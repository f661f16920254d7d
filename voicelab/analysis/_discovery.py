"""Which runs a list of paths names: run directories, matrix runs, folders of runs, trial folders.

The first step of :func:`~._frames.load_frames`: each path (a store URL mirrored first, its
``latest`` resolved) is checked to hold regular files and folders only, then walked without
following links; every run found keeps its report, its matrix cell and stage (from the sweep's
matrix-report.json) and its trial folders in natural order. A trial folder outside any run is
grouped under its parent folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRANSCRIPT_JSON,
    TRANSCRIPT_MD,
    TRIAL_REPORT,
    VOICE_EVENTS,
    VOICE_METRICS,
    MatrixReport,
    RunReport,
    check_tree,
    mirror,
    open_location,
    read_json,
    resolve_latest,
    resolve_local_latest,
)
from ..errors import ConfigError
from ._json import JsonObject


@dataclass
class _Run:
    run_id: str
    cell: str | None
    matrix_id: str | None
    run_dir: Path | None
    report: JsonObject | None
    trial_dirs: list[Path]
    #: a staged sweep's stage the cell ran in
    stage: str | None = None


def _natural(path: Path) -> tuple[int, str]:
    return (len(path.name), path.name)


def _trial_dirs_of(run_dir: Path) -> list[Path]:
    with os.scandir(run_dir) as entries:
        found = [Path(e.path) for e in entries
                 if e.is_dir(follow_symlinks=False) and os.path.isfile(
                     os.path.join(e.path, TRIAL_REPORT))]
    return sorted(found, key=_natural)


_MatrixCells = tuple[str, dict[str, tuple[str, str | None]]]


def _matrix_of(matrix_dir: Path, cache: dict[Path, _MatrixCells]) -> _MatrixCells:
    """The matrix run id and folder name -> (cell id, stage), from matrix-report.json."""
    if matrix_dir not in cache:
        document = read_json(matrix_dir / MATRIX_REPORT, model=MatrixReport)
        mapping = {Path(str(cell["bundle_path"])).name: (
            str(cell["cell_id"]), cell["stage"] if isinstance(cell.get("stage"), str) else None)
            for cell in document.get("cells", [])
            if isinstance(cell, dict) and cell.get("cell_id") and cell.get("bundle_path")}
        cache[matrix_dir] = (str(document.get("run_id") or matrix_dir.name), mapping)
    return cache[matrix_dir]


def _run_of(run_dir: Path, trial_dirs: list[Path], cache: dict[Path, _MatrixCells]) -> _Run:
    report = None
    if (run_dir / RUN_REPORT).is_file():
        report = read_json(run_dir / RUN_REPORT, model=RunReport)
    cell = matrix_id = stage = None
    if (run_dir.parent / MATRIX_REPORT).is_file():
        matrix_id, cells = _matrix_of(run_dir.parent, cache)
        cell, stage = cells.get(run_dir.name, (run_dir.name, None))
    run_id = str(report["run_id"]) if report and report.get("run_id") else run_dir.name
    return _Run(run_id, cell, matrix_id, run_dir if report else None, report, trial_dirs,
                stage)


#: What the frames (and the failure and transcript views) read of a bundle in a store; the
#: audio is fetched when a widget first plays it.
STORE_FILES = frozenset({RUN_REPORT, MATRIX_REPORT, TRIAL_REPORT,
                         VOICE_METRICS, VOICE_EVENTS, TRANSCRIPT_JSON,
                         TRANSCRIPT_MD})


def _local(given: str | os.PathLike[str]) -> Path:
    """A local folder to read: a store URL is mirrored (its documents), ``latest`` resolved."""
    opened = open_location(given)
    if isinstance(opened, Path):
        return resolve_local_latest(opened.expanduser())
    return mirror(resolve_latest(opened), names=STORE_FILES)


def _discover(paths: Iterable[str | os.PathLike[str]]) -> list[_Run]:
    runs: dict[Path, _Run] = {}
    cache: dict[Path, _MatrixCells] = {}
    for given in paths:
        path = _local(given).resolve()
        if not path.exists():
            raise ConfigError("no such run directory or trial folder", source=path)
        check_tree(path)  # regular files and folders only, before anything is read
        if (path / TRIAL_REPORT).is_file():
            run = runs.setdefault(path.parent, _run_of(path.parent, [], cache))
            if path not in run.trial_dirs:
                run.trial_dirs.append(path)
            continue
        for root, dirs, files in os.walk(path):  # symlinks (e.g. ``latest``) are not followed
            here = Path(root)
            if RUN_REPORT in files:
                dirs.clear()
                if here not in runs:
                    runs[here] = _run_of(here, _trial_dirs_of(here), cache)
            elif TRIAL_REPORT in files:  # a trial folder outside any run
                dirs.clear()
                run = runs.setdefault(here.parent, _run_of(here.parent, [], cache))
                run.trial_dirs.append(here)
            else:
                dirs.sort()
    for run in runs.values():
        run.trial_dirs.sort(key=_natural)
    return [run for run in runs.values() if run.trial_dirs or run.report]
