"""Outputs a user names (``--junit``, ``--html``, ``report --output``) are checked before any
work: a path that cannot be written is exit 2 with one line at once (never a FileNotFoundError
after every trial ran), and a folder that does not exist yet is created."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import voicelab

    return voicelab.run(RUN, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path_factory.mktemp("runs"))).bundle_path


def test_an_unwritable_junit_path_is_refused_before_the_first_trial(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = _cli("run", str(RUN), "--trials", "1", "--artifacts-dir", str(tmp_path / "runs"),
                "--junit", str(blocker / "reports" / "junit.xml"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "--junit" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_a_junit_path_in_a_new_folder_is_written(tmp_path: Path):
    junit = tmp_path / "reports" / "ci" / "junit.xml"
    done = _cli("run", str(RUN), "--trials", "1", "--artifacts-dir", str(tmp_path / "runs"),
                "--junit", str(junit), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "<testsuites" in junit.read_text()


def test_compare_and_report_refuse_an_unwritable_output_before_working(bundle: Path,
                                                                       tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for command in (["compare", str(bundle), str(bundle), "--html", str(blocker / "c.html")],
                    ["compare", str(bundle), str(bundle), "--junit", str(blocker / "c.xml")],
                    ["report", str(bundle), "--output", str(blocker / "r.html")]):
        done = _cli(*command, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stdout + done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
