"""docs/github-actions.yml, run as GitHub runs it: its steps in order, each `if:` evaluated as
GitHub does (a step without one runs on success(); success()/failure()/always(), the
github.event_name, steps.<id>.outcome and hashFiles() it uses), its `run:` scripts in bash in
a checkout of a repository whose voice-tests/ is the starter suite against the fake product,
and its `uses:` actions replaced by local stand-ins (upload and download of artifacts between
workflow runs in a folder, with the download action's `workflow_conclusion` default of
`success`). The report and the HTML comparison are left out (a notebook each: minutes, tested
elsewhere)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from voicelab.cli._init import init_suite

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = yaml.safe_load((ROOT / "docs" / "github-actions.yml").read_text())
JOB = WORKFLOW["jobs"]["voicelab"]
BROKEN = "settings: {claim_without_tool: true}"  # the agent says "saved" and saves nothing


@dataclass
class WorkflowRun:
    """One run of the workflow: its event, conclusion and each step's outcome by id/name."""

    number: int
    event: str
    branch: str
    outcomes: dict[str, str] = field(default_factory=dict)
    conclusion: str = "success"


class Actions:
    """The workflow runs of one repository, and the artifacts they uploaded (a folder each)."""

    def __init__(self, root: Path):
        self.root = root
        self.runs: list[WorkflowRun] = []

    def artifacts(self, run: WorkflowRun) -> Path:
        return self.root / "artifacts" / str(run.number)

    # --- the `uses:` actions ------------------------------------------------------------------

    def upload(self, run: WorkflowRun, inputs: dict[str, Any], workspace: Path) -> None:
        """actions/upload-artifact: the paths (globs, `!` excludes), links followed."""
        name = str(inputs["name"]).replace("${{ github.run_id }}", str(run.number))
        target = self.artifacts(run) / name
        lines = [line.strip() for line in str(inputs["path"]).splitlines() if line.strip()]
        excluded = {Path(workspace, line[1:].rstrip("/")) for line in lines
                    if line.startswith("!")}
        for line in lines:
            if line.startswith("!"):
                continue
            for found in glob.glob(str(workspace / line)):
                self._copy(Path(found), target / Path(found).relative_to(workspace), excluded)

    def _copy(self, source: Path, target: Path, excluded: set[Path]) -> None:
        if source in excluded:
            return
        if source.is_dir():  # a link to a folder is followed, as upload-artifact does
            for child in source.iterdir():
                self._copy(child, target / child.name, excluded)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)

    def download(self, run: WorkflowRun, inputs: dict[str, Any], workspace: Path) -> None:
        """dawidd6/action-download-artifact: the artifacts of the last run of `branch` whose
        conclusion matches `workflow_conclusion` (default: success; completed: any)."""
        wanted = str(inputs.get("workflow_conclusion", "success"))
        candidates = [r for r in self.runs if r.branch == inputs["branch"] and r is not run
                      and r.event == "push" and (wanted == "completed" or r.conclusion == wanted)]
        if not candidates:
            return  # if_no_artifact_found: warn
        source = self.artifacts(candidates[-1])
        pattern = re.compile(str(inputs["name"]))
        for artifact in source.iterdir() if source.is_dir() else ():
            if pattern.fullmatch(artifact.name):
                shutil.copytree(artifact, workspace / str(inputs["path"]) / artifact.name)

    # --- one run of the job -------------------------------------------------------------------

    def run(self, repository: Path, *, event: str, branch: str) -> WorkflowRun:
        run = WorkflowRun(len(self.runs) + 1, event, branch)
        workspace = self.root / f"workspace-{run.number}"
        shutil.copytree(repository, workspace)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_REF_NAME": branch,
               "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ['PATH']}",
               **{key: str(value) for key, value in JOB["env"].items() if "${{" not in
                  str(value)}, "VOICELAB_TRIALS": "2"}
        failed = False
        for index, step in enumerate(JOB["steps"]):
            key = step.get("id") or step.get("name") or f"step-{index}"
            if not self._condition(step.get("if"), run, failed, workspace):
                run.outcomes[key] = "skipped"
                continue
            ok = self._step(step, run, workspace, env)
            run.outcomes[key] = "success" if ok else "failure"
            failed = failed or not ok
        run.conclusion = "failure" if failed else "success"
        self.runs.append(run)
        run.workspace = workspace  # type: ignore[attr-defined]
        return run

    def _condition(self, expression: str | None, run: WorkflowRun, failed: bool,
                   workspace: Path) -> bool:
        text = "success()" if expression is None else str(expression)
        if not re.search(r"\b(always|success|failure|cancelled)\(\)", text):
            text = f"success() && ({text})"  # GitHub's implicit status check

        class Steps:
            def __getattr__(self, name: str) -> Any:
                class Step:
                    outcome = run.outcomes.get(name, "skipped")
                return Step()

        def hash_files(pattern: str) -> str:
            return "x" if glob.glob(str(workspace / pattern), recursive=True) else ""

        namespace = {"always": lambda: True, "success": lambda: not failed,
                     "failure": lambda: failed, "cancelled": lambda: False,
                     "hashFiles": hash_files, "steps": Steps(),
                     "github": type("G", (), {"event_name": run.event})()}
        python = text.replace("&&", " and ").replace("||", " or ")
        python = re.sub(r"!(?!=)", " not ", python)
        return bool(eval(python, {"__builtins__": {}}, namespace))  # noqa: S307 - our workflow

    def _step(self, step: dict[str, Any], run: WorkflowRun, workspace: Path,
              env: dict[str, str]) -> bool:
        uses = str(step.get("uses", ""))
        if uses.startswith("actions/upload-artifact"):
            self.upload(run, step["with"], workspace)
            return True
        if uses.startswith("dawidd6/action-download-artifact"):
            self.download(run, step["with"], workspace)
            return True
        if uses:  # checkout, setup-python, the JUnit check: nothing to stand in for
            return True
        script = str(step["run"])
        if script.startswith("pip install") or "voice-evaluator report" in script:
            return True  # installed already; the report is a notebook (tested elsewhere)
        script = script.replace(" --html voicelab-compare.html", "")
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=workspace,
                              env=env, capture_output=True, text=True, timeout=600)
        (workspace / f"step-{len(run.outcomes)}.log").write_text(done.stdout + done.stderr)
        return done.returncode == 0


@pytest.fixture
def actions(tmp_path: Path) -> Actions:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "voice-evaluator"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m voicelab "$@"\n')
    launcher.chmod(0o755)
    return Actions(tmp_path)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    init_suite(repo / "voice-tests")
    run = repo / "voice-tests" / "run.yaml"
    # the latency verdict is judged elsewhere (a busy test machine may leave it undecided)
    run.write_text(run.read_text() + "\n")
    scenario = repo / "voice-tests" / "scenario.yaml"
    scenario.write_text(scenario.read_text().replace("  max_first_audio_latency_ms: 2000\n", ""))
    return repo


def _break(repository: Path) -> Path:
    run = repository / "voice-tests" / "run.yaml"
    run.write_text(run.read_text().replace("settings: {}", BROKEN, 1))
    return repository


def test_a_regressing_pull_request_is_compared_even_after_a_red_main(actions, repository,
                                                                      tmp_path):
    green = actions.run(repository, event="push", branch="main")
    assert green.conclusion == "success", green.outcomes
    assert len(list(actions.artifacts(green).glob("*/voicelab-runs/*/run-report.json"))) == 1

    passing = actions.run(repository, event="pull_request", branch="feature")
    assert passing.conclusion == "success", passing.outcomes
    compare = "compare with main (default gates; exit 3 on a regression)"
    assert passing.outcomes[compare] == "success"

    broken = tmp_path / "broken-repo"
    shutil.copytree(repository, broken)
    _break(broken)
    regressing = actions.run(broken, event="pull_request", branch="feature")
    assert regressing.outcomes["run"] == "failure"
    assert regressing.outcomes[compare] == "failure"  # it ran, and found the regression
    assert (regressing.workspace / "voicelab-compare.xml").is_file()  # type: ignore[attr-defined]

    red = actions.run(broken, event="push", branch="main")  # main goes red once
    assert red.conclusion == "failure"
    again = actions.run(repository, event="pull_request", branch="feature")
    assert again.outcomes["baseline"] == "success"
    assert again.outcomes[compare] == "success", again.outcomes  # still a baseline: red main's


def test_the_environment_is_named_one_way():
    text = (ROOT / "docs" / "github-actions.yml").read_text()
    assert JOB["environment"] == "staging"
    assert not re.search(r"\bStaging\b|STAGING_", text)
