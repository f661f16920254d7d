"""voicelab.TrialProgress: the tqdm bar behind the CLI's progress and the notebooks'."""

from __future__ import annotations

import io
from types import SimpleNamespace

import voicelab


def _result(trial_id: str, passed: bool) -> SimpleNamespace:
    return SimpleNamespace(report=SimpleNamespace(passed=passed),
                           summary=SimpleNamespace(trial_id=trial_id))


def test_the_bar_counts_trials_and_failures_and_closes_at_the_end():
    stream = io.StringIO()
    progress = voicelab.TrialProgress(auto=False, file=stream)
    progress(_result("trial-002", True), 3, 4)  # a resumed run starts from what it has
    progress(_result("trial-004", False), 4, 4)
    text = stream.getvalue()
    assert "4/4" in text and "trial-004 FAIL, 1 failed" in text
    assert progress._bar is None  # closed


def test_a_disabled_bar_draws_nothing():
    stream = io.StringIO()
    progress = voicelab.TrialProgress(auto=False, file=stream, enabled=False)
    progress(_result("trial-001", True), 1, 1)
    assert stream.getvalue() == ""


def _finished(trial_id: str, seed: int, *, passed: bool, failed=()) -> SimpleNamespace:
    summary = SimpleNamespace(trial_id=trial_id, seed=seed, passed=passed, status=None,
                              execution_status="succeeded", exit_reason="endpoint_completion",
                              failed_verdicts=list(failed), inconclusive_verdicts=[],
                              attempts=1, measurement_degraded=False)
    report = SimpleNamespace(passed=passed, failures=[], verdicts=[], scenario_id="booking",
                             persona="Jordan", environment="quiet")
    return SimpleNamespace(report=report, summary=summary)


def test_without_a_terminal_each_finished_trial_is_a_line_and_the_end_a_count():
    from voicelab._progress import TrialLines

    stream, now = io.StringIO(), [100.0]
    from voicelab.cli._summaries import trial_line

    lines = TrialLines(file=stream, every_seconds=None, clock=lambda: now[0],
                       describe=lambda result: trial_line(result.summary, result.report))
    assert lines.progress_line() == "progress: no trial finished yet, 0s elapsed"
    now[0] = 110.0
    lines(_finished("trial-001", 42, passed=True), 1, 3)
    now[0] = 120.0
    lines(_finished("trial-002", 43, passed=False, failed=["outcome_saved"]), 2, 3)
    assert lines.progress_line() == ("progress: 2/3 trials finished, 1 not passed, 20s "
                                     "elapsed, about 10s to go")
    now[0] = 190.0
    lines(_finished("trial-003", 44, passed=True), 3, 3)
    lines.close()
    assert stream.getvalue().splitlines() == [
        "[1/3] trial-001 seed 42: pass (exit endpoint_completion)",
        "[2/3] trial-002 seed 43: FAIL (exit endpoint_completion, failed: outcome_saved)",
        "[3/3] trial-003 seed 44: pass (exit endpoint_completion)",
        "progress: 3/3 trials finished, 1 not passed, 1m30s elapsed"]
    assert lines.printed_trials


def test_the_first_line_comes_when_the_run_opens_its_bundle_and_only_once():
    from pathlib import Path

    from voicelab._progress import TrialLines
    from voicelab.execution import ObservedRun, RunObserver

    stream = io.StringIO()
    lines = TrialLines(file=stream, every_seconds=None)
    assert isinstance(lines, RunObserver)
    run = ObservedRun(run_id="r1", bundle=Path("runs/r1"), scenario="booking", persona="Jordan",
                      environment="quiet", adapter="websocket", planned=10)
    lines.run_started(run)
    lines.run_started(run)  # a retry pass opens nothing new: still one line
    assert stream.getvalue().splitlines() == [
        "starting 10 trial(s) of booking / Jordan / quiet against websocket: bundle runs/r1"]
    assert not lines.printed_trials


def test_a_count_never_goes_backwards():
    from voicelab._progress import TrialLines

    stream = io.StringIO()
    lines = TrialLines(file=stream, every_seconds=None)
    lines(_finished("trial-002", 43, passed=True), 2, 3)  # a resumed run: one was done
    lines(_finished("trial-003", 44, passed=True), 1, 3)
    assert [line.split("]")[0] for line in stream.getvalue().splitlines()] == ["[2/3", "[2/3"]


def test_a_sweep_names_the_cell_and_the_periodic_line_comes_from_a_thread():
    import threading

    from voicelab._progress import TrialLines

    class Recorder(io.StringIO):
        def __init__(self):
            super().__init__()
            self.written = threading.Event()

        def write(self, text):
            if text.startswith("progress:"):
                self.written.set()
            return super().write(text)

    stream = Recorder()
    lines = TrialLines(file=stream, every_seconds=0.01, cells=True)
    assert stream.written.wait(30)  # the periodic line needs no finished trial
    lines(_finished("trial-001", 42, passed=True), 1, 2)
    lines.close()
    text = stream.getvalue()
    assert "[1/2] booking / Jordan / quiet: trial-001 seed 42: pass\n" in text
    assert "progress: no trial finished yet" in text
