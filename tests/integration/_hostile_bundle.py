"""What the hostile-bundle modules share (test_hostile_bundles.py, test_hostile_bundle_reading.py):
commands run in-process (``voicelab.cli.main``) where the outcome is a line and a code, and as a
subprocess with a capped address space (``RLIMIT_AS``) where a regression would allocate
gigabytes: it then fails with a MemoryError instead of swapping; and ``report``'s refusal at the
door (``check_bundle``), with nothing written.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from voicelab.cli import main

#: The seed suite's run file (``seed_suite``, ``seed_run``: conftest.py).
RUN = "run-workload-neutral-voice.yaml"
#: Far above what re-scoring a short bundle needs (~0.7 GB of address space), far below the
#: gigabytes the audited inputs allocated.
ADDRESS_SPACE_BYTES = 2 * 1024 ** 3


def cli(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main([*arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(result: tuple[int, str, str], *words: str) -> str:
    code, _, err = result
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("voice-evaluator: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def capped(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *arguments], capture_output=True,
                          text=True, timeout=120, preexec_fn=_cap_memory, cwd=cwd)


def refused_capped(completed: subprocess.CompletedProcess[str], *words: str) -> str:
    return refused((completed.returncode, completed.stdout, completed.stderr), *words)


def report_refused(capsys: pytest.CaptureFixture[str], bundle: Path, *words: str) -> str:
    """``report`` refuses the bundle at the door: one line, exit 2, no page and no partially
    executed notebook beside it."""
    page = bundle.parent / "report.html"
    line = refused(cli(capsys, "report", str(bundle), "--output", str(page)), *words)
    assert not page.exists() and not page.with_suffix(".ipynb").exists()
    return line


def report_refused_capped(bundle: Path, *words: str) -> str:
    page = bundle.parent / "report.html"
    line = refused_capped(capped("report", str(bundle), "--output", str(page)), *words)
    assert not page.exists() and not page.with_suffix(".ipynb").exists()
    return line
