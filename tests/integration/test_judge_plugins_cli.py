"""Plug-in judges from the command line: a judge an installed distribution registers under
``voicelab.judges`` (a real ``*.dist-info`` on the path) and the built-in ``keywords`` judge
are checked by ``validate``, run after each trial by ``run``, and run again by ``rescore
--judges``; a name nothing provides is exit 2 with one line naming the file and the key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"

JUDGE_MODULE = '''
from voicelab.scoring import JudgeVerdict


class SaidGoodbye:
    """Passes when the assistant said the word its settings name."""

    def __init__(self, settings):
        self.word = settings["word"]

    async def judge(self, evidence):
        said = any(self.word in turn["text"] for turn in evidence.transcript
                   if turn["role"] == "assistant")
        return JudgeVerdict(passed=said, label="said" if said else "not said",
                            reason=f"looked for {self.word!r}")


class FallsOver:
    def __init__(self, settings): ...

    async def judge(self, evidence):
        raise RuntimeError("the plug-in judge broke")
'''


def judges_block(judges: list[dict[str, object]]) -> str:
    return "quality_evaluation:\n  judges: " + json.dumps(judges) + "\n"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed suite with a run file per case, and the distribution ``acme-judges``."""
    base = tmp_path_factory.mktemp("judge-plugins")
    folder = base / "suite"
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    run_text = (folder / RUN).read_text()
    cases = {
        "run-judged.yaml": [
            {"name": "saved", "judge": "acme_saved", "is_critical": True,
             "settings": {"word": "saved"}},
            {"name": "broken", "judge": "acme_broken"},
            {"name": "plan", "judge": "keywords", "settings": {"require": ["daily plan"]}}],
        "run-strict.yaml": [
            {"name": "plan", "judge": "keywords", "is_critical": True,
             "settings": {"forbid": ["saved"]}}],
        "run-unknown.yaml": [{"name": "x", "judge": "acme_nothing"}],
    }
    for name, judges in cases.items():
        (folder / name).write_text(run_text + judges_block(judges))
    site = base / "site-packages"
    info = site / "acme_judges-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-judges\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[voicelab.judges]\nacme_saved = acme_judges:SaidGoodbye\n"
        "acme_broken = acme_judges:FallsOver\n")
    (site / "acme_judges.py").write_text(JUDGE_MODULE)
    return folder


def voicelab_cli(suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("VOICE_AGENT_", "AZURE_OPENAI_", "OPENAI_"))}
    environment["PYTHONPATH"] = os.pathsep.join([str(suite.parent / "site-packages"), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "voicelab", *args], cwd=suite,
                          capture_output=True, text=True, env=environment, timeout=120)


def judges_of(bundle: Path) -> list[dict[str, object]]:
    report = json.loads((bundle / "trial-001" / "trial-report.json").read_text())
    return report["judges"]


def test_validate_resolves_an_entry_point_judge_and_lists_it(suite: Path) -> None:
    done = voicelab_cli(suite, "validate", "run-judged.yaml")
    assert done.returncode == 0, done.stderr
    assert "judges     saved (critical), broken, plan" in done.stdout


def test_a_judge_nothing_provides_is_exit_2_naming_file_and_key(suite: Path) -> None:
    done = voicelab_cli(suite, "validate", "run-unknown.yaml")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "run-unknown.yaml: quality_evaluation.judges[0].judge: unknown judge " \
           "'acme_nothing'" in line
    assert "acme_saved (acme-judges)" in line  # what is installed
    assert "Traceback" not in done.stderr


def test_run_records_plug_in_judges_and_rescore_runs_them_again(suite: Path,
                                                                tmp_path: Path) -> None:
    done = voicelab_cli(suite, "run", "run-judged.yaml", "--trials", "1", "--artifacts-dir",
                        str(tmp_path / "runs"))
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = next((tmp_path / "runs").glob("2*"))
    saved, broken, plan = judges_of(bundle)
    assert (saved["kind"], saved["status"], saved["label"]) == ("plugin", "passed", "said")
    assert saved["rationale"] == "looked for 'saved'" and saved["critical"]
    # an advisory judge that raised is an error result, and the trial still passes
    assert broken["status"] == "error" and broken["error"] == "RuntimeError: the plug-in judge broke"
    assert plan["status"] == "passed"
    assert "Traceback" not in done.stdout + done.stderr

    copy = tmp_path / "strict"
    rescored = voicelab_cli(suite, "rescore", str(bundle), "--output", str(copy), "--judges",
                            "run-strict.yaml")
    assert rescored.returncode == 3, rescored.stdout + rescored.stderr
    [plan] = judges_of(copy)
    assert plan["status"] == "failed" and plan["rationale"] == "forbidden but said: saved"
    assert judges_of(bundle)[0]["status"] == "passed"  # the original is untouched

    refused = voicelab_cli(suite, "rescore", str(bundle), "--output", str(tmp_path / "x"),
                           "--judges", "run-unknown.yaml")
    assert refused.returncode == 2
    assert "quality_evaluation.judges[0].judge: unknown judge" in refused.stderr
    assert not (tmp_path / "x").exists()
