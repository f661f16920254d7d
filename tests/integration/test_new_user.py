"""A new user's first hour, as a test: the working tree copied to a temporary folder, installed
exactly as the README says (the core install, into a new virtual environment), then the main
command, ``init`` + ``run``, ``report`` on the core install, ``compare`` with and without gates,
a resume after SIGINT without repeating the overrides, and a pytest run of a tiny suite
through the plugin, each as a user types it.

Economy: the install is the README's ``pip install -e .`` itself, with pip's own cache (the
packages the CI's install of ``.[all]`` has just downloaded) — the same wheels, resolved and
installed by pip into a fresh environment, nothing shared with the test's own environment.
The install and the commands take about two minutes, in one xdist worker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

#: the README's example (the main command runs it)
EXAMPLE = "examples/run-workload-neutral-voice.yaml"
#: a regression the default gates catch: the product claims "saved" and saves nothing
BROKEN = "endpoint.settings.claim_without_tool=true"
#: each trial then takes about 1.5 s: an interrupt lands mid-run
SLOW = "endpoint.settings.reply_latency_ms=700"


def _readme_block(marker: str) -> str:
    """The command under ``<!-- marker -->`` in the README (as .ci/run reads the test one)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n```", text, re.S)
    assert match, f"no {marker} block in README.md"
    return match.group(1).strip()


def _copy_working_tree(target: Path) -> None:
    """The tracked files as they are now (uncommitted edits included), links kept as links."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the new-user test copies the tracked files")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source, copy = ROOT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy, follow_symlinks=False)


def _clean_environment() -> dict[str, str]:
    """The environment of a new user's shell: none of this test run's Python settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTEST_ADDOPTS")
           and not k.startswith(("PYTEST_", "COV_"))}
    ours = str(Path(sys.prefix).resolve())
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                  if part and not str(Path(part).resolve()).startswith(ours))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


class User:
    """The copied checkout with its virtual environment, and a shell to type commands in."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.bin = home / ".venv" / "bin"

    def sh(self, command: str, *, timeout: float = 300,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``command`` in bash with the virtual environment activated, as the README does."""
        return subprocess.run(["bash", "-c", f". {self.bin}/activate && {command}"],
                              cwd=cwd or self.home, env=self.env, capture_output=True,
                              text=True, timeout=timeout)


def _bundle(stdout: str) -> Path:
    match = re.search(r"^bundle: (.+)$", stdout, re.M)
    assert match, stdout
    return Path(match.group(1).strip())


@pytest.fixture(scope="module")
def user(tmp_path_factory) -> User:
    home = tmp_path_factory.mktemp("new-user") / "voicelab"
    _copy_working_tree(home)
    env = _clean_environment()
    main = subprocess.run(["bash", "-c", _readme_block("main-command")], cwd=home, env=env,
                          capture_output=True, text=True, timeout=900)
    assert main.returncode == 0, main.stdout[-3000:] + main.stderr[-3000:]
    user = User(home, env)
    user.main = main  # type: ignore[attr-defined]
    return user


def test_the_readme_main_command_installs_and_runs(user):
    main = user.main
    assert "3/3 trial(s) passed" in main.stdout
    assert (_bundle(main.stdout) / "run-report.json").is_file()
    # the core install is what the README's command installed: no notebook extra
    assert not list((user.home / ".venv").glob("lib/python*/site-packages/papermill"))
    # without a terminal (a CI log), what starts is said at once, then each finished trial is
    # a line while the run goes on
    for seed in (42, 43, 44):
        assert re.search(rf"^\[\d/3\] trial-\d+ seed {seed}: pass", main.stdout, re.M), \
            main.stdout
    # (pip's own warnings of the install step may come first, on a machine with a pip config)
    assert "starting 3 trial(s) of " in main.stderr, main.stderr[-3000:]
    before, _, _ = main.stderr.partition("starting 3 trial(s) of ")
    assert "progress:" not in before and "trial-" not in before, before[-1000:]
    assert "progress: 3/3 trials finished, 0 not passed" in main.stderr


def test_init_then_run(user):
    init = user.sh("voice-evaluator init suite")
    assert init.returncode == 0, init.stderr
    assert "next: voice-evaluator validate suite/run.yaml" in init.stdout
    validated = user.sh("voice-evaluator validate suite/run.yaml")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    run = user.sh("voice-evaluator run suite/run.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3/3 trial(s) passed" in run.stdout


def test_report_on_the_core_install_names_the_extra(user):
    baseline = _bundle(user.main.stdout)
    report = user.sh(f"voice-evaluator report {baseline} --output report.html")
    assert report.returncode == 2, report.stdout + report.stderr
    assert report.stderr.strip().splitlines() == [
        "voice-evaluator: error: report needs the 'papermill' package: "
        "pip install 'voicelab[notebooks]'"]
    assert not (user.home / "report.html").exists()
    # the global flag after the sub-command is accepted
    debug = user.sh(f"voice-evaluator validate {EXAMPLE} --debug")
    assert debug.returncode == 0, debug.stderr


def test_compare_with_and_without_gates(user):
    baseline = _bundle(user.main.stdout)  # the main command's run: 3 trials, seeds 42-44
    broken = user.sh(f"voice-evaluator run {EXAMPLE} --trials 3 --set {BROKEN} "
                     "--label candidate")
    assert broken.returncode == 3, broken.stdout + broken.stderr
    candidate = _bundle(broken.stdout)
    judged = user.sh(f"voice-evaluator compare {baseline} {candidate} --junit compare.xml")
    assert judged.returncode == 3, judged.stdout + judged.stderr
    assert "gates: pass_rate_drop, first_audio_latency_ms_p95_increase, " \
           "response_latency_ms_p95_increase (defaults:" in judged.stdout
    assert "gate FAILED: pass_rate_drop" in judged.stdout
    junit = (user.home / "compare.xml").read_text()
    assert 'testsuite name="baseline.' in junit and 'testsuite name="candidate.' in junit
    unjudged = user.sh(f"voice-evaluator compare {baseline} {candidate} --no-default-gates")
    assert unjudged.returncode == 0, unjudged.stdout + unjudged.stderr
    assert "gates: none" in unjudged.stdout
    same = user.sh(f"voice-evaluator compare {baseline} {baseline}")
    assert same.returncode == 0 and "gate FAILED" not in same.stdout, same.stdout
    nothing = user.sh(f"voice-evaluator compare {baseline} {user.home / 'examples'}")
    assert nothing.returncode == 2 and "CANDIDATE: not a run or sweep folder" in nothing.stderr


def test_resume_after_sigint_without_repeating_the_overrides(user, interrupt_after_first_trial):
    artifacts = user.home / "interrupted"
    process = interrupt_after_first_trial(
        ["bash", "-c", f". {user.bin}/activate && exec voice-evaluator run {EXAMPLE} "
                       f"--trials 4 --concurrency 1 --artifacts-dir {artifacts} --set {SLOW}"],
        artifacts, env=user.env, cwd=user.home)
    assert process.returncode == 130, process.stdout + process.stderr
    bundle = _bundle(process.stdout)
    assert json.loads((bundle / "run-report.json").read_text())["status"] == "interrupted"
    resumed = user.sh(f"voice-evaluator run --resume {bundle}")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming with the run's --set overrides (kept in the bundle): {SLOW}" \
        in resumed.stdout
    assert "4/4 trial(s) passed" in resumed.stdout
    conflicting = user.sh(f"voice-evaluator run --resume {bundle} "
                          "--set endpoint.settings.reply_latency_ms=0")
    assert conflicting.returncode == 2 and "conflicts with the run's --set" in \
        conflicting.stderr


def test_a_tiny_suite_through_the_pytest_plugin(user):
    project = user.home / "my-agent-tests"
    shutil.copytree(user.home / "examples", project / "suite")
    run_file = "suite/run-workload-neutral-voice.yaml"
    (project / "pytest.ini").write_text(f"[pytest]\nvoicelab_run_files =\n    {run_file}\n")
    (project / "test_agent.py").write_text(
        "def test_planning(voicelab_run):\n"
        f"    outcome = voicelab_run('{run_file}', trials=2)\n"
        "    assert outcome.report.passed_trials == 2\n\n\n"
        "def test_a_regression_says_why(voicelab_run):\n"
        f"    voicelab_run('{run_file}', trials=1, overrides=['{BROKEN}'])\n")
    installed = user.sh("pip install -q pytest")
    assert installed.returncode == 0, installed.stderr
    result = user.sh("python -m pytest -q -p no:cacheprovider --voicelab-trials 2", cwd=project)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"^1 failed, 3 passed", out.splitlines()[-1]), out[-2000:]
    assert "failed verdicts:" in out and "outcome_follow_up_created" in out
    assert "transcript:" in out and "bundle: " in out
