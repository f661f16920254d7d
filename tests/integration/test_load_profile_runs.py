"""Load profiles end to end on the seed example (the embedded fake product): what the run
report records, that the running count never passes the maximum, that a resumed run keeps its
profile, a sweep's cells sharing one schedule, and the command line (docs/load-profiles.md).
No wall-clock timing is asserted: orderings, counts and the report's own figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import voicelab
from voicelab import RunOptions
from voicelab.artifacts import RunReport
from voicelab.execution import combined

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=180, env=ENV)


def report_of(bundle: Path) -> RunReport:
    return RunReport.model_validate_json((bundle / "run-report.json").read_text())


def assert_trace_consistent(report: RunReport, *, most: int, starts: int) -> None:
    """Every start and end sampled in time order, the count never negative nor over ``most``."""
    achieved = report.achieved_concurrency
    assert achieved is not None and achieved.stride == 1
    samples = achieved.samples
    assert len(samples) == 2 * starts
    assert [s.t_seconds for s in samples] == sorted(s.t_seconds for s in samples)
    assert all(0 <= s.running <= most for s in samples)
    assert samples[-1].running == 0
    assert achieved.peak == max(s.running for s in samples) <= most


@pytest.fixture(scope="module")
def open_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five trials arriving 1 ms apart with room for two: the third and later arrivals find
    both slots taken (a trial takes far longer than 1 ms) and start late."""
    folder = tmp_path_factory.mktemp("open")
    outcome = voicelab.run(EXAMPLE, RunOptions(trials=5, arrival_rate=1000.0, max_concurrency=2,
                                               artifacts_dir=folder, scoring="loop"))
    return outcome.bundle_path


@pytest.fixture(scope="module")
def open_run(open_bundle: Path) -> RunReport:
    return report_of(open_bundle)


def test_an_open_run_records_its_profile_and_counts_the_late_starts(open_run):
    profile = open_run.load_profile
    assert profile is not None
    assert (profile.kind, profile.arrival_rate_per_second, profile.max_concurrency) == \
        ("open", 1000.0, 2)
    assert open_run.executed_trials == 5 and open_run.status == "complete"  # none skipped
    assert_trace_consistent(open_run, most=2, starts=5)
    achieved = open_run.achieved_concurrency
    assert achieved is not None and 3 <= achieved.late_starts <= 5
    assert achieved.late_start_max_seconds is not None and achieved.late_start_mean_seconds \
        is not None and 0 < achieved.late_start_mean_seconds <= achieved.late_start_max_seconds


def test_a_replay_takes_a_profile_too(open_bundle, tmp_path):
    outcome = voicelab.replay(open_bundle, artifacts_dir=tmp_path, ramp_seconds=0.1)
    report = report_of(outcome.bundle_path)
    assert report.replay_of is not None and report.executed_trials == 5
    assert report.load_profile is not None and report.load_profile.ramp_seconds == 0.1
    assert_trace_consistent(report, most=report.load_profile.max_concurrency, starts=5)


def test_a_resumed_run_keeps_its_profile_unless_given_one(tmp_path):
    first = voicelab.run(EXAMPLE, RunOptions(trials=2, concurrency=2, ramp_seconds=0.2,
                                             artifacts_dir=tmp_path, scoring="loop"))
    kept = report_of(voicelab.run(EXAMPLE, RunOptions(
        trials=3, resume=first.bundle_path, scoring="loop")).bundle_path)
    assert kept.load_profile is not None
    assert (kept.load_profile.kind, kept.load_profile.ramp_seconds,
            kept.load_profile.chosen_by) == ("closed", 0.2, "resumed")
    assert_trace_consistent(kept, most=2, starts=1)  # this session's one trial
    changed = report_of(voicelab.run(EXAMPLE, RunOptions(
        trials=4, resume=first.bundle_path, arrival_rate=5.0, scoring="loop")).bundle_path)
    assert changed.load_profile is not None
    assert (changed.load_profile.kind, changed.load_profile.chosen_by) == ("open", "caller")


def test_a_sweeps_cells_start_from_one_schedule(tmp_path):
    swept = cli("sweep", str(SUITE), "--trials", "1", "--concurrency", "2", "--arrival-rate",
                "500", "--workers", "1", "--quiet", "--artifacts-dir", str(tmp_path))
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert "load: open, 500 trial(s)/s, at most 2 at once; peak " in swept.stdout
    reports = [report_of(p.parent) for p in sorted(tmp_path.glob("*/*/run-report.json"))
               if "latest" not in p.parts]
    assert len(reports) == 4 and all(r.executed_trials == 1 for r in reports)
    for report in reports:
        assert report.load_profile is not None and report.load_profile.kind == "open"
        assert report.load_profile.max_concurrency == 2
    # on the sweep's one clock, the cells' running counts summed never pass its maximum
    changes = sorted((s.t_seconds, index, s.running) for index, r in enumerate(reports)
                     if r.achieved_concurrency is not None
                     for s in r.achieved_concurrency.samples)
    running = [0] * len(reports)
    for _, index, count in changes:
        running[index] = count
        assert sum(running) <= 2
    # the summary's line is of the cells together
    together = combined([r.achieved_concurrency for r in reports
                         if r.achieved_concurrency is not None])
    assert together.peak == max(s.running for s in together.samples) <= 2
    # four arrivals 2 ms apart with room for two: the later ones waited for a slot
    assert sum(r.achieved_concurrency.late_starts for r in reports
               if r.achieved_concurrency is not None) >= 1


def test_a_resumed_sweep_keeps_its_profile(tmp_path):
    first = voicelab.run_matrix(SUITE, RunOptions(trials=1, concurrency=2, ramp_seconds=0.2,
                                                  artifacts_dir=tmp_path, scoring="loop"))
    again = voicelab.run_matrix(SUITE, RunOptions(trials=2, resume=first.run_dir,
                                                  scoring="loop"))
    profiles = {(r.load_profile.kind, r.load_profile.ramp_seconds, r.load_profile.chosen_by)
                for r in (cell.report for cell in again.cells) if r.load_profile is not None}
    assert profiles == {("closed", 0.2, "resumed")}


def test_the_command_line_ramps_on_local_workers_and_runs_an_open_load(tmp_path):
    ramped = cli("run", str(EXAMPLE), "--trials", "3", "--concurrency", "3", "--ramp", "0.3",
                 "--workers", "2", "--quiet", "--artifacts-dir", str(tmp_path / "ramp"))
    assert ramped.returncode == 0, ramped.stdout + ramped.stderr
    assert "load: closed, 3 at once, ramp 0.3 s; peak " in ramped.stdout
    bundle = next(p.parent for p in (tmp_path / "ramp").glob("*/run-report.json")
                  if p.parent.name != "latest")
    report = report_of(bundle)
    assert report.load_profile is not None and report.load_profile.ramp_seconds == 0.3
    assert_trace_consistent(report, most=3, starts=3)
    assert "load: closed, 3 at once, ramp 0.3 s" in (bundle / "evaluator.log").read_text()

    opened = cli("run", str(EXAMPLE), "--trials", "3", "--arrival-rate", "1000",
                 "--max-concurrency", "1", "--workers", "1", "--quiet",
                 "--artifacts-dir", str(tmp_path / "open"))
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert "load: open, 1000 trial(s)/s, at most 1 at once" in opened.stdout
    assert "trial(s) started late (no free slot at their arrival)" in opened.stdout


@pytest.mark.parametrize("args", [
    ["run", str(EXAMPLE), "--ramp", "1", "--arrival-rate", "2"],
    ["sweep", str(SUITE), "--arrival-rate", "2", "--ramp", "1"],
    ["run", str(EXAMPLE), "--max-concurrency", "2"],
    ["sweep", str(SUITE), "--max-concurrency", "2"],
    ["run", str(EXAMPLE), "--arrival-rate", "nan"],
    ["run", str(EXAMPLE), "--max-concurrency", "0", "--arrival-rate", "1"],
])
def test_bad_profiles_exit_2_with_one_line(args, tmp_path):
    result = cli(*args, "--artifacts-dir", str(tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--ramp" in result.stderr or "--arrival-rate" in result.stderr \
        or "--max-concurrency" in result.stderr
    assert not any(tmp_path.iterdir())  # refused before any bundle exists
