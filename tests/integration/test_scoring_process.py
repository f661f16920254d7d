"""The scoring process: calls scored beside the event loop write the same bundle as on the loop;
a lost scoring process costs a warning, not a trial; its log records reach the run's log."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import pickle
import signal
import time
from pathlib import Path

import pytest

import voicelab
from voicelab.errors import ConfigError
from voicelab.execution import _inline, _scorer, _scoring_process
from voicelab.execution._scorer import Scorer
from voicelab.execution._scoring_process import scoring_process
from voicelab.runner import Call, score_on_loop

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: the only fields of a trial report that depend on when it was scored
SCORED_AT = ("ended_at", "duration_seconds")


@pytest.fixture(scope="module")
def finished_call(tmp_path_factory):
    """A real call, caught on its way to the scorer, and its run's configuration."""
    calls = []
    real = Scorer.score

    async def catch(self, call):
        calls.append(call)
        return await real(self, call)

    Scorer.score = catch
    try:
        outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path_factory.mktemp("run")))
    finally:
        Scorer.score = real
    assert outcome.exit_code == 0
    return voicelab.load_run(EXAMPLE), calls[0]


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _report_but_its_time(data: bytes) -> dict:
    report = json.loads(data)
    return {key: value for key, value in report.items() if key not in SCORED_AT}


def test_a_call_scored_in_the_process_writes_the_bundle_the_loop_writes(finished_call, tmp_path):
    loaded, call = finished_call
    on_loop = asyncio.run(score_on_loop(loaded, _to(call, tmp_path / "loop")))
    in_process = asyncio.run(scoring_process().score("one run", pickle_of(loaded),
                                                      _to(call, tmp_path / "process")))
    loop_files, process_files = _files(tmp_path / "loop"), _files(tmp_path / "process")
    assert sorted(loop_files) == sorted(process_files) and "mixed.wav" in loop_files
    for name, content in loop_files.items():
        if name == "trial-report.json":
            assert _report_but_its_time(content) == _report_but_its_time(process_files[name])
        else:
            assert content == process_files[name], name
    assert in_process.report.passed and on_loop.report.passed
    assert [t.model_dump() for t in in_process.turn_metrics] == \
        [t.model_dump() for t in on_loop.turn_metrics]


def test_the_scoring_process_log_records_are_logged_by_the_parent(finished_call, tmp_path,
                                                                   caplog):
    """A bundle that cannot be written: the scoring process's ERROR lines are the parent's."""
    loaded, call = finished_call
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.INFO, logger="voicelab"):
        scored = asyncio.run(scoring_process().score("another run", pickle_of(loaded),
                                                     _to(call, blocker / "trial-001")))
    assert scored.report.execution_status == "failed"
    assert scored.report.failures[-1].code == "bundle_write_failed"
    errors = [r for r in caplog.records if r.name == "voicelab.runner._scoring"
              and r.levelno == logging.ERROR]
    assert errors and "could not write the trial's bundle" in errors[0].getMessage()
    assert errors[0].process != os.getpid()  # logged over there, handled here


def test_a_lost_scoring_process_costs_a_warning_not_a_trial(tmp_path):
    killed: list[int] = []

    def kill_after_the_first(result, finished, total):
        pid = scoring_process().pid
        if finished == 1 and pid is not None:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while scoring_process().pid is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert scoring_process().pid is None  # gone: no id to read its CPU time by
            killed.append(pid)

    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=4,
        concurrency=1,
        artifacts_dir=tmp_path,
        on_trial_done=kill_after_the_first))
    assert killed and outcome.exit_code == 0
    assert [t.report.passed for t in outcome.trials] == [True] * 4
    for trial in outcome.trials:
        folder = outcome.bundle_path / trial.report.trial_id
        assert sorted(json.loads((folder / "trial-report.json").read_text())["files"]) == \
            sorted(p.name for p in folder.iterdir())
    log = (outcome.bundle_path / "evaluator.log").read_text()
    assert "the scoring process was lost (killed by SIGKILL): scored on the event loop" in log
    replacement = scoring_process().pid
    assert replacement is not None and replacement != killed[0]  # the next trials' process


def test_the_scoring_process_yields_the_cores(finished_call):
    """A low priority from its first line: the loop stamping arrivals never waits for a core
    behind scoring (and, unlike SCHED_IDLE, a busy machine slows scoring, never stops it)."""
    asyncio.run(scoring_process().score("a run", pickle_of(finished_call[0]),
                                        _to(finished_call[1], Path("/dev/null/nowhere"))))
    pid = scoring_process().pid
    assert pid is not None
    assert os.getpriority(os.PRIO_PROCESS, pid) == _scoring_process.SCORING_NICENESS
    assert os.sched_getscheduler(pid) == os.SCHED_OTHER


def test_runs_with_judges_and_runs_that_ask_are_scored_on_the_loop(tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    assert Scorer(loaded, run_key="a").in_process
    assert not Scorer(loaded, run_key="b", mode="loop").in_process
    judged = dataclasses.replace(loaded, run=loaded.run.model_copy(
        update={"quality_evaluation": object()}))
    assert not Scorer(judged, run_key="c").in_process
    with pytest.raises(ConfigError, match="scoring"):
        voicelab.run(EXAMPLE, voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path,
            scoring="thread"))


def pickle_of(loaded) -> bytes:
    return pickle.dumps(loaded)


def _to(call: Call, trial_dir: Path) -> Call:
    return dataclasses.replace(call, trial_dir=trial_dir)


def test_a_call_that_cannot_be_pickled_is_scored_on_the_loop(finished_call, tmp_path, caplog):
    """An adapter's own object in the call's evidence: said in the log, scored all the same."""
    loaded, call = finished_call
    odd = dataclasses.replace(call, trial_dir=tmp_path / "trial-001",
                              documents={"persona-session.json": {"handle": lambda: None}})
    with caplog.at_level(logging.INFO, logger="voicelab"):
        scored = asyncio.run(Scorer(loaded, run_key="odd").score(odd))
    assert scored.report.passed
    assert "persona-session.json" in scored.report.files
    assert any("cannot be sent to the scoring process" in r.getMessage() for r in caplog.records)


def test_a_machine_that_cannot_start_the_scoring_process_scores_on_the_loop(tmp_path,
                                                                            monkeypatch):
    """One warning, then every trial of the run on the loop: nothing is lost."""
    def cannot(self):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(_scoring_process.ScoringProcess, "_spawn", cannot)
    monkeypatch.setattr(_scoring_process, "_PROCESS", None)  # a fresh one, which cannot start
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=3,
        concurrency=1,
        artifacts_dir=tmp_path))
    assert outcome.exit_code == 0 and [t.report.passed for t in outcome.trials] == [True] * 3
    log = (outcome.bundle_path / "evaluator.log").read_text()
    assert log.count("no scoring process (it could not be started: OSError") == 1


def test_an_interrupt_while_a_finished_call_waits_to_be_scored_loses_nothing(tmp_path,
                                                                           monkeypatch):
    """Trial 2's call ends while trial 1 is still being scored (one scoring slot at
    concurrency 1); the interrupt lands then: trial 2 is scored and written all the same."""
    from voicelab.runner import RunInterrupted

    real_call, real_score = _inline.run_call, Scorer.score

    async def slow_score(self, call):
        if call.index == 1:
            await asyncio.sleep(0.5)
        return await real_score(self, call)

    async def main():
        run = asyncio.current_task()

        async def call_then_interrupt(plan):
            call = await real_call(plan)
            if plan.index == 2:
                asyncio.get_running_loop().call_soon(run.cancel)
            return call

        monkeypatch.setattr(_inline, "run_call", call_then_interrupt)
        monkeypatch.setattr(Scorer, "score", slow_score)
        with pytest.raises(RunInterrupted) as stopped:
            await voicelab.arun(EXAMPLE, voicelab.RunOptions(
                trials=3,
                concurrency=1,
                artifacts_dir=tmp_path))
        return stopped.value.outcome

    outcome = asyncio.run(main())
    assert [(t.report.trial_id, t.report.exit_reason) for t in outcome.trials] == [
        ("trial-001", "endpoint_completion"), ("trial-002", "endpoint_completion")]
    assert outcome.report.status == "interrupted" and outcome.report.executed_trials == 2
    assert (outcome.bundle_path / "trial-002" / "trial-report.json").is_file()


def test_the_run_s_last_calls_are_scored_on_the_idle_loop_too(tmp_path, monkeypatch):
    """Four calls end together while the scoring process is slow: once no call is left to
    run, the loop scores the newest waiting ones and the process the oldest; every bundle is
    whole."""
    real_roundtrip = _scoring_process.ScoringProcess._roundtrip
    real_on_loop = _scorer.score_on_loop
    by_process, on_loop = [], []

    def slow_roundtrip(self, run_key, blob, call_frame, claim):
        import time

        reply = real_roundtrip(self, run_key, blob, call_frame, claim)
        if reply is not None:
            by_process.append(reply.load()[1].report.trial)
            time.sleep(0.3)
        return reply

    async def scored_on_loop(loaded, call, **options):
        on_loop.append(call.index)
        return await real_on_loop(loaded, call, **options)

    monkeypatch.setattr(_scoring_process.ScoringProcess, "_roundtrip", slow_roundtrip)
    monkeypatch.setattr(_scorer, "score_on_loop", scored_on_loop)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=4,
        concurrency=4,
        artifacts_dir=tmp_path))
    assert outcome.exit_code == 0 and [t.report.passed for t in outcome.trials] == [True] * 4
    assert by_process and on_loop, (by_process, on_loop)
    assert sorted(by_process + on_loop) == [1, 2, 3, 4]
    assert 1 in by_process and max(on_loop) == 4  # the oldest, the newest
    for trial in outcome.trials:
        folder = outcome.bundle_path / trial.report.trial_id
        assert sorted(json.loads((folder / "trial-report.json").read_text())["files"]) == \
            sorted(p.name for p in folder.iterdir())


def test_the_loop_scores_no_waiting_call_while_a_call_is_in_progress(finished_call,
                                                                     monkeypatch):
    """A sweep's other run may still have calls on the loop: their stamps come first."""
    loaded, call = finished_call
    release = asyncio.Event()

    class Busy:
        """A scoring process that stays busy with an earlier call until released."""

        async def score(self, run_key, blob, call, *, claim):
            await release.wait()
            return None if not claim() else "by the process"

    async def on_loop(loaded, call, **options):
        return "on the loop"

    monkeypatch.setattr(_scorer, "score_on_loop", on_loop)

    async def main():
        scorer = Scorer(loaded, run_key="sweep")
        scorer._process = Busy()
        with _scorer.live_call():  # another run's call
            first = asyncio.create_task(scorer.score(call))
            second = asyncio.create_task(scorer.score(call))
            scorer.finishing()
            await asyncio.sleep(5 * _scorer.HELP_POLL_SECONDS)
            assert [w.taken for w in scorer._waiting] == [None, None]
        await asyncio.sleep(5 * _scorer.HELP_POLL_SECONDS)  # the loop is free: it helps
        release.set()
        return await first, await second

    assert asyncio.run(main()) == ("on the loop", "on the loop")
