"""An inconclusive trial is run again before it counts; the exit code of ``rescore`` is the one
``run`` decides (its gates included).

The inconclusive attempt is made for real: an adapter loaded by dotted path (as a user's own
would be) drops the product's transcripts on the first connection of the process only, so the
first attempt has nothing to look for topics in, and the retry, same seed, does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import voicelab
import voicelab.analysis
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"

DEAF_ONCE_ADAPTER = '''
from voicelab.endpoints.websocket import WebSocketEndpoint


class TranscriptsFromTheSecondCall(WebSocketEndpoint):
    """The websocket adapter, but the first call of this process loses its transcripts."""

    calls = 0

    async def connect(self):
        type(self).calls += 1
        self._drop_transcripts = type(self).calls == 1
        await super().connect()

    def _receive_now(self, received_ns, item):
        events = super()._receive_now(received_ns, item)
        if self._drop_transcripts:
            events = [e for e in events if e.type != "transcript_final"]
        return events
'''


def _run_file(folder: Path) -> Path:
    (folder / "deaf_once.py").write_text(DEAF_ONCE_ADAPTER, encoding="utf-8")
    text = EXAMPLE.read_text(encoding="utf-8")
    for name in ("scenario", "persona", "data", "script"):
        text = text.replace(f"{name}-workload-neutral-voice.yaml",
                            str(EXAMPLE.parent / f"{name}-workload-neutral-voice.yaml"))
    text = text.replace("artifacts_dir: ../artifacts/workload-neutral-voice",
                        f"artifacts_dir: {folder / 'artifacts'}")
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _fake_product(folder: Path) -> tuple[subprocess.Popen, str]:
    import json

    process = subprocess.Popen([sys.executable, "-m", "voicelab.doubles.product"],
                               stdout=subprocess.PIPE, text=True, cwd=folder)
    uri = json.loads(process.stdout.readline())["uri"]  # type: ignore[union-attr]
    return process, uri


def test_an_inconclusive_trial_is_retried_and_its_decided_attempt_counts(tmp_path):
    product, uri = _fake_product(tmp_path)
    try:
        outcome = voicelab.run(_run_file(tmp_path), voicelab.RunOptions(
            trials=1,
            overrides=[
            "endpoint.adapter=deaf_once.TranscriptsFromTheSecondCall",
            f"endpoint.settings={{uri: '{uri}'}}", "outcome_probe=null",
            "scenario.eval_spec.outcome_spec={}"]))
    finally:
        product.terminate()
        product.wait(10)
    assert outcome.exit_code == 0
    report = read_json(outcome.bundle_path / "trial-001" / "trial-report.json")
    assert report["status"] == "passed" and report["passed"] is True
    assert report["attempt"] == 2
    assert report["session_id"].endswith("-t001-a2")  # a new session for the product
    earlier, = report["attempts"]
    assert earlier["status"] == "inconclusive" and earlier["concurrency"] == 1
    assert any(line.startswith("expected_topics: inconclusive") for line in earlier["inconclusive"])
    first = read_json(outcome.bundle_path / earlier["path"] / "attempt-report.json")
    assert {v["name"]: v["status"] for v in first["verdicts"]}["expected_topics"] == "inconclusive"
    run_report = outcome.report
    assert run_report.passed_trials == 1 and run_report.inconclusive_trials == 0
    assert run_report.retried_trials == 1
    assert run_report.trials[0].attempts == 2
    # every reader sees one trial: the earlier attempt is evidence, not a trial of the run
    frames = voicelab.analysis.load_frames(outcome.bundle_path)
    assert len(frames.trials) == 1 and frames.trials["status"].iat[0] == "passed"


def test_without_retries_an_inconclusive_trial_is_reported_so_not_failed(tmp_path):
    product, uri = _fake_product(tmp_path)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "voicelab", "run", str(_run_file(tmp_path)), "--trials", "1",
             "--quiet", "--retry-inconclusive", "0",
             "--set", "endpoint.adapter=deaf_once.TranscriptsFromTheSecondCall",
             "--set", f"endpoint.settings={{uri: '{uri}'}}", "--set", "outcome_probe=null",
             "--set", "scenario.eval_spec.outcome_spec={}",
             "--junit", str(tmp_path / "junit.xml")],
            capture_output=True, text=True, timeout=180, cwd=tmp_path)
    finally:
        product.terminate()
        product.wait(10)
    assert done.returncode == 3, done.stderr
    # (a busy machine may add ", measurement degraded")
    assert "trial-001 seed 42: INCONCLUSIVE (exit endpoint_completion, undecided: " \
           "expected_topics, concise" in done.stdout and "FAIL" not in done.stdout
    assert "0/1 trial(s) passed, 1 inconclusive (not passed)" in done.stdout
    assert "(0/1, 1 inconclusive, Wilson 95%)" in done.stdout
    junit = (tmp_path / "junit.xml").read_text()
    assert 'type="inconclusive"' in junit and "inconclusive after 1 attempt(s)" in junit


def test_rescore_exits_with_the_code_the_run_report_says_gates_included(tmp_path):
    gate = "gates=[{metric: first_audio_latency_ms, quantile: 0.5, max: 0.001}]"
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path / "runs",
        overrides=[gate]))
    assert outcome.exit_code == 3 and outcome.report.passed_trials == 2  # the gate blocks
    again = voicelab.rescore(outcome.bundle_path, output=tmp_path / "again")
    assert read_json(tmp_path / "again" / "run-report.json")["exit_code"] == 3
    assert again.exit_code == 3
    done = subprocess.run([sys.executable, "-m", "voicelab", "rescore",
                           str(outcome.bundle_path)], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    # a trial folder alone is judged on its trials
    alone = voicelab.rescore(outcome.bundle_path / "trial-001", output=tmp_path / "one")
    assert alone.exit_code == 0
