"""Nothing outside a bundle is ever written: every member a command writes or appends to in an
existing bundle (``run --resume``, ``sweep --resume``, ``rescore`` in place) is replaced, never
written through, when it is a hard link to a file elsewhere; a symbolic link anywhere in the
bundle is refused at the door (exit 2) before anything is written.

The bundles come from the embedded fake product (unpaced); a small adapter beside the run file
fails every even trial, so ``--rerun-failed`` has a trial to run again into the bundle.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab.artifacts import LOCK_FILE
from voicelab.runner import rescore

ROOT = Path(__file__).resolve().parents[2]
RUN = "run-workload-neutral-voice.yaml"
OUTSIDE = b"a file outside the bundle: never written\n"

OVERRIDES = ["endpoint.adapter=alternating_links.EvenTrialsFail"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, alternating_suite) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    alternating_suite(folder, "alternating_links")
    (folder / "suite.yaml").write_text(
        "name: links\nbase: run-workload-neutral-voice.yaml\nenvironments: [quiet]\n"
        "personas:\n  - persona: persona-workload-neutral-voice.yaml\n"
        "    script: script-workload-neutral-voice.yaml\n"
        "    data: data-workload-neutral-voice.yaml\n")
    return folder


@pytest.fixture(scope="module")
def made(suite: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("made")
    run = voicelab.run(suite / RUN, voicelab.RunOptions(
        trials=2,
        artifacts_dir=base / "runs",
        overrides=OVERRIDES))
    assert [t.report.status for t in run.trials] == ["passed", "failed"]
    sweep = voicelab.run_matrix(suite / "suite.yaml", voicelab.RunOptions(
        trials=2,
        artifacts_dir=base / "sweeps",
        overrides=OVERRIDES))
    return {"run": run.bundle_path, "sweep": sweep.run_dir}


def _copy(folder: Path, into: Path) -> Path:
    target = into / folder.name
    shutil.copytree(folder, target, symlinks=True)
    return target


def _link_every_member(bundle: Path, outside: Path) -> dict[Path, Path]:
    """Every regular file of the bundle (and its lock file) made a hard link to a file of its
    own outside the bundle; returns member -> outside file."""
    outside.mkdir()
    members = [p for p in bundle.rglob("*") if p.is_file() and not p.is_symlink()]
    members += [folder / LOCK_FILE for folder in {bundle, *(p.parent for p in members
                                                            if p.name == "run-report.json")}]
    links: dict[Path, Path] = {}
    for number, member in enumerate(members):
        target = outside / f"{number:04d}-{member.name}"
        target.write_bytes(OUTSIDE)
        member.unlink(missing_ok=True)
        os.link(target, member)
        links[member] = target
    return links


def _resume_run(bundle: Path, suite: Path) -> None:
    outcome = voicelab.run(suite / RUN, voicelab.RunOptions(
        resume=bundle,
        rerun_failed=True,
        overrides=OVERRIDES))
    assert [t.report.trial for t in outcome.trials] == [1, 2]


def _resume_sweep(bundle: Path, suite: Path) -> None:
    voicelab.run_matrix(suite / "suite.yaml", voicelab.RunOptions(
        resume=bundle,
        rerun_failed=True,
        overrides=OVERRIDES))


def _rescore(bundle: Path, suite: Path) -> None:
    rescore(bundle)


COMMANDS = {"run --resume": ("run", _resume_run), "sweep --resume": ("sweep", _resume_sweep),
            "rescore": ("run", _rescore)}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_hard_linked_member_is_replaced_never_written_through(command, made, suite,
                                                                 tmp_path):
    kind, act = COMMANDS[command]
    bundle = _copy(made[kind], tmp_path)
    # the bundle's members are hard links to files elsewhere, their content replaced by the
    # outside file's: the documents are unreadable, so the commands read nothing from them
    # but their own names; they rewrite what they write
    keep = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    links = _link_every_member(bundle, tmp_path / "outside")
    for member, content in keep.items():  # the bundle reads as before: only the inode is shared
        links[member].write_bytes(content)
        member.chmod(0o600)
    expected = {target: target.read_bytes() for target in links.values()}
    act(bundle, suite)
    changed = [target.name for target, content in expected.items()
               if target.read_bytes() != content]
    assert not changed, f"written through a hard link: {changed}"
    if command != "rescore":  # a resumed run appends to its log: a file of its own now
        log = bundle / "evaluator.log" if kind == "run" else \
            next(bundle.glob("*/evaluator.log"))
        assert os.stat(log).st_nlink == 1
        assert log.read_bytes().startswith(keep[log])  # its earlier lines kept
        assert len(log.read_bytes()) > len(keep[log])


@pytest.mark.parametrize("member", ["evaluator.log", "run-report.json",
                                    "trial-001/trial-report.json", "trial-002/voice-events.jsonl",
                                    LOCK_FILE])
@pytest.mark.parametrize("command", ["run", "rescore"])
def test_a_symbolic_link_in_the_bundle_is_refused_before_anything_is_written(
        member, command, made, tmp_path):
    bundle = _copy(made["run"], tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(OUTSIDE)
    (bundle / member).unlink(missing_ok=True)
    (bundle / member).symlink_to(outside)
    arguments = ["run", "--resume", str(bundle), "--rerun-failed",
                 *(f"--set={override}" for override in OVERRIDES)] if command == "run" \
        else ["rescore", str(bundle)]
    done = subprocess.run([sys.executable, "-m", "voicelab", *arguments], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "symbolic link" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert outside.read_bytes() == OUTSIDE
