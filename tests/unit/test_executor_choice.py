"""Choosing the executor (by name, like an adapter; a plug-in by its dotted path), and what a
lost trial leaves (no worker processes started here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import voicelab
from voicelab.errors import ConfigError
from voicelab.execution import (
    EXECUTORS,
    DaskExecutor,
    Executor,
    InlineExecutor,
    LocalExecutor,
    RunContext,
    TrialJob,
    choose_executor,
)
from voicelab.execution._process_run import lost_trial

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def _inline(choice: tuple[Executor, bool]) -> bool:
    executor, owned = choice
    return isinstance(executor, InlineExecutor) and owned


def test_the_library_default_and_one_worker_run_in_process():
    assert _inline(choose_executor(None, workers=None, scheduler=None, parallel=8))
    assert _inline(choose_executor("inline", workers=None, scheduler=None, parallel=8))
    assert _inline(choose_executor("local", workers=1, scheduler=None, parallel=8))
    # more workers than trials that can run at once would only idle: capped, here to one
    assert _inline(choose_executor("local", workers=4, scheduler=None, parallel=1))


def test_local_workers_are_capped_by_the_trials_in_flight():
    executor, owned = choose_executor("local", workers=4, scheduler=None, parallel=3)
    assert isinstance(executor, LocalExecutor) and owned and executor.workers == 3
    executor, owned = choose_executor(None, workers=2, scheduler=None, parallel=8)
    assert isinstance(executor, LocalExecutor) and executor.workers == 2


def test_dask_and_a_given_executor():
    executor, owned = choose_executor("dask", workers=2, scheduler="tcp://127.0.0.1:8786",
                                      parallel=8)
    assert isinstance(executor, DaskExecutor) and owned
    assert executor.scheduler == "tcp://127.0.0.1:8786"
    shared = LocalExecutor(2)
    assert choose_executor(shared, workers=None, scheduler=None, parallel=8) == (shared, False)


def test_the_registry_names_the_built_in_executors():
    assert EXECUTORS.names() == ["dask", "inline", "local"]
    assert EXECUTORS.resolve("inline") is InlineExecutor
    assert EXECUTORS.resolve("local") is LocalExecutor
    assert EXECUTORS.resolve("dask") is DaskExecutor


class CountingExecutor:
    """A plug-in executor (it runs nothing here: only its choice is tested)."""

    description = "counting"
    shares_disk = True

    def __init__(self, parallel: int):
        self.parallel = parallel

    @classmethod
    def for_run(cls, *, workers, scheduler, parallel):
        return cls(parallel)

    async def start(self):
        pass

    async def open_run(self, run):
        raise NotImplementedError

    async def close(self):
        pass


class NotAnExecutor:
    @classmethod
    def for_run(cls, *, workers, scheduler, parallel):
        return object()


def test_a_plug_in_executor_is_named_by_its_dotted_path():
    executor, owned = choose_executor(f"{__name__}.CountingExecutor", workers=None,
                                      scheduler=None, parallel=5)
    assert isinstance(executor, CountingExecutor) and owned and executor.parallel == 5
    with pytest.raises(ConfigError, match="not an executor") as error:
        choose_executor(f"{__name__}.NotAnExecutor", workers=None, scheduler=None, parallel=5)
    assert error.value.key == "executor"
    with pytest.raises(ConfigError, match="no classmethod for_run"):
        choose_executor(f"{__name__}.TrialJob", workers=None, scheduler=None, parallel=5)


@pytest.mark.parametrize(("executor", "workers", "scheduler", "key"), [
    ("threads", None, None, "executor"),
    ("no_such_module.Executor", None, None, "executor"),
    (42, None, None, "executor"),
    ("local", None, "tcp://127.0.0.1:8786", "scheduler"),
    ("local", 0, None, "workers"),
    ("local", 10_000, None, "workers"),
    ("inline", 2, None, "workers"),
])
def test_bad_choices_are_configuration_errors(executor, workers, scheduler, key):
    with pytest.raises(ConfigError) as error:
        choose_executor(executor, workers=workers, scheduler=scheduler, parallel=4)
    assert error.value.key == key


def _context(bundle: Path) -> RunContext:
    loaded = voicelab.load_run(EXAMPLE)
    return RunContext(key="run-1", loaded=loaded, run_id="run-1", bundle=bundle,
                      speech_cache_dir=bundle / ".speech-cache")


def test_a_lost_trial_is_a_failed_execution_listing_its_partial_evidence(tmp_path):
    trial_dir = tmp_path / "trial-003"
    trial_dir.mkdir()
    (trial_dir / "user-sent.wav").write_bytes(b"RIFF")  # what it wrote before the loss
    (tmp_path / ".trial-003.abc.running").touch()
    result = lost_trial(_context(tmp_path), TrialJob(3, 44), "the worker (pid 7) ended")
    assert result.report.execution_status == "failed" and not result.report.passed
    assert [(f.kind, f.code) for f in result.report.failures] == [("runner", "worker_lost")]
    assert result.report.files == ["trial-report.json", "user-sent.wav"]
    assert result.report.trial == 3 and result.report.seed == 44
    on_disk = json.loads((trial_dir / "trial-report.json").read_text())
    assert on_disk["failures"][0]["message"] == "the worker (pid 7) ended"
    assert not list(tmp_path.glob(".trial-*.running"))


def test_a_trial_that_finished_before_its_worker_died_keeps_its_report(tmp_path):
    context = _context(tmp_path)
    first = lost_trial(context, TrialJob(1, 42), "lost")  # stands in for a finished report
    finished = first.report.model_copy(update={"execution_status": "succeeded",
                                               "passed": True, "failures": []})
    (tmp_path / "trial-001" / "trial-report.json").write_text(finished.model_dump_json())
    again = lost_trial(context, TrialJob(1, 42), "lost after writing")
    assert again.report.passed and again.report.execution_status == "succeeded"
