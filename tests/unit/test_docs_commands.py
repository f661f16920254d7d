"""The commands the docs tell a user to type are accepted by the CLI's parser, and the GitHub
Actions example is a workflow (YAML with the steps it promises)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from voicelab.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "github-actions.yml"
RECIPE = ROOT / "docs" / "testing-your-agent.md"
#: pages whose ``bash`` blocks are commands to type
PAGES = (RECIPE, ROOT / "docs" / "ingest.md")


def _commands(text: str) -> list[str]:
    """Every ``voice-evaluator ...`` command of a shell text, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines()
            if line.strip().startswith("voice-evaluator ")]


def _run_steps() -> list[str]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["voicelab"]["steps"]
    return [step["run"] for step in steps if "run" in step]


def _documented() -> list[str]:
    blocks = [block for page in PAGES
              for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)]
    return [command for block in blocks for command in _commands(block)]


@pytest.mark.parametrize("command", [c for run in _run_steps() for c in _commands(run)]
                         + _documented())
def test_a_documented_command_parses(command):
    words = shlex.split(command.replace('"$baseline"', "baseline").replace(
        '"$VOICELAB_TRIALS"', "20").replace("<", "").replace(">", ""), comments=True)
    build_parser().parse_args(words[1:])  # a usage error exits 2 (SystemExit)


def test_the_workflow_runs_keeps_and_compares():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["voicelab"]["steps"]
    names = " | ".join(str(step.get("name", step.get("uses", ""))) for step in steps)
    for promised in ("run the suite", "keep the bundle", "publish the JUnit", "compare"):
        assert promised in names
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["if"] == "always()"  # kept when the run fails too
    run = next(s["run"] for s in steps if s.get("name") == "run the suite")
    assert "--junit voicelab-junit.xml" in run and "--artifacts-dir voicelab-runs" in run
