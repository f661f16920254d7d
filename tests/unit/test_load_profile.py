"""Load profiles on a fake clock: which profile a run gets, when each start is due, what the
trace keeps and counts (docs/load-profiles.md)."""

from __future__ import annotations

import asyncio
import math

import pytest

from voicelab.artifacts import AchievedConcurrency, LoadProfile, RunReport
from voicelab.errors import ConfigError
from voicelab.execution import (
    DEFAULT_RAMP_ABOVE,
    DEFAULT_RAMP_SECONDS_PER_TRIAL,
    ConcurrencyTrace,
    StartSchedule,
    combined,
    load_line,
    load_profile,
)
from voicelab.execution._load_profile import RunLoad, resumed_profile


class FakeClock:
    """A clock that moves only when a start waits for its slot."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def schedule(profile: LoadProfile, *, trials: int | None = None) -> tuple[StartSchedule, FakeClock]:
    clock = FakeClock()
    return StartSchedule(profile, trials=trials, clock=clock, sleep=clock.sleep), clock


def turns(schedule: StartSchedule, count: int) -> list:
    async def take() -> list:
        return [await schedule.turn() for _ in range(count)]
    return asyncio.run(take())


# --- which profile -----------------------------------------------------------------------------

def test_up_to_the_threshold_every_trial_starts_at_once():
    profile = load_profile(concurrency=DEFAULT_RAMP_ABOVE)
    assert (profile.kind, profile.ramp_seconds, profile.chosen_by) == ("closed", 0.0, "caller")
    assert profile.max_concurrency == DEFAULT_RAMP_ABOVE


def test_above_the_threshold_the_default_ramps():
    profile = load_profile(concurrency=200)
    assert profile.kind == "closed" and profile.chosen_by == "default"
    assert profile.ramp_seconds == pytest.approx(200 * DEFAULT_RAMP_SECONDS_PER_TRIAL)
    # what starts together decides: a run of fewer trials than its concurrency
    assert load_profile(concurrency=200, trials=DEFAULT_RAMP_ABOVE).ramp_seconds == 0.0
    assert load_profile(concurrency=200, trials=60).ramp_seconds == \
        pytest.approx(60 * DEFAULT_RAMP_SECONDS_PER_TRIAL)
    # --ramp 0 keeps today's all-at-once start at any concurrency
    assert load_profile(concurrency=200, ramp_seconds=0).ramp_seconds == 0.0


def test_an_open_profile_defaults_its_maximum_to_the_concurrency():
    profile = load_profile(concurrency=7, arrival_rate=3)
    assert (profile.kind, profile.arrival_rate_per_second, profile.max_concurrency) == \
        ("open", 3.0, 7)
    assert load_profile(concurrency=7, arrival_rate=3, max_concurrency=2).max_concurrency == 2


@pytest.mark.parametrize(("keywords", "key"), [
    ({"ramp_seconds": 1.0, "arrival_rate": 2.0}, "arrival_rate"),
    ({"max_concurrency": 3}, "max_concurrency"),
    ({"ramp_seconds": -1.0}, "ramp_seconds"),
    ({"ramp_seconds": math.nan}, "ramp_seconds"),
    ({"ramp_seconds": 1e9}, "ramp_seconds"),
    ({"ramp_seconds": True}, "ramp_seconds"),
    ({"arrival_rate": 0.0}, "arrival_rate"),
    ({"arrival_rate": math.inf}, "arrival_rate"),
    ({"arrival_rate": 1.0, "max_concurrency": 0}, "max_concurrency"),
])
def test_bad_profiles_are_refused_naming_the_option(keywords, key):
    with pytest.raises(ConfigError) as raised:
        load_profile(concurrency=4, **keywords)
    assert raised.value.key == key


def test_a_resumed_run_keeps_its_profile():
    ramped = load_profile(concurrency=10, ramp_seconds=3.0)
    kept = resumed_profile(ramped, concurrency=10)
    assert (kept.kind, kept.ramp_seconds, kept.chosen_by) == ("closed", 3.0, "resumed")
    opened = resumed_profile(load_profile(concurrency=10, arrival_rate=5, max_concurrency=4),
                             concurrency=2)
    assert (opened.arrival_rate_per_second, opened.max_concurrency) == (5.0, 4)
    # a bundle written before profiles were recorded gets the default
    assert resumed_profile(None, concurrency=100).chosen_by == "default"


def test_the_profile_round_trips_through_the_run_report():
    achieved = AchievedConcurrency(peak=3, late_starts=1, late_start_max_seconds=0.5)
    fields = {"run_id": "r", "status": "complete", "scenario_id": "s", "persona": "p",
              "environment": "quiet", "adapter": "fake", "suite_hash": "h", "bundle_path": "b",
              "started_at": "t", "ended_at": "t", "trial_count": 1, "planned_trials": 1,
              "executed_trials": 1, "passed_trials": 1, "pass_at_k": True,
              "pass_power_k": True, "exit_code": 0}
    report = RunReport(**fields, load_profile=load_profile(concurrency=4, arrival_rate=2),
                       achieved_concurrency=achieved)
    again = RunReport.model_validate_json(report.model_dump_json())
    assert again.load_profile == report.load_profile
    assert again.achieved_concurrency == achieved
    # a report without them (older bundles, ingest) writes neither
    assert "load_profile" not in RunReport(**fields).model_dump()


# --- when starts are due -------------------------------------------------------------------------

def test_a_ramp_spreads_the_first_starts_evenly_then_starts_as_slots_free():
    plan, clock = schedule(load_profile(concurrency=5, ramp_seconds=10.0))
    given = turns(plan, 7)
    assert [t.due for t in given[:5]] == pytest.approx([0.0, 2.0, 4.0, 6.0, 8.0])
    assert clock.slept == pytest.approx([2.0, 2.0, 2.0, 2.0])  # the 6th and 7th wait for nothing
    assert [t.due for t in given[5:]] == pytest.approx([8.0, 8.0])
    assert not any(t.late for t in given)


def test_a_ramp_over_fewer_trials_than_the_concurrency_spreads_those():
    plan, _ = schedule(load_profile(concurrency=10, ramp_seconds=4.0), trials=2)
    assert [t.due for t in turns(plan, 2)] == pytest.approx([0.0, 2.0])


def test_no_ramp_starts_everything_at_once():
    plan, clock = schedule(load_profile(concurrency=4, ramp_seconds=0.0))
    assert [t.due for t in turns(plan, 4)] == [0.0] * 4 and clock.slept == []


def test_an_arrival_rate_makes_starts_due_on_its_grid_whatever_came_before():
    plan, clock = schedule(load_profile(concurrency=2, arrival_rate=4.0))
    first = turns(plan, 2)
    assert [t.due for t in first] == pytest.approx([0.0, 0.25])
    clock.now = 3.0  # every trial loop was busy for a while: the next arrivals are overdue
    late = turns(plan, 2)
    assert [t.due for t in late] == pytest.approx([0.5, 0.75])
    assert all(t.late for t in late) and not any(t.late for t in first)


# --- what a run records ----------------------------------------------------------------------------

def test_the_trace_is_bounded_and_keeps_the_exact_peak():
    trace = ConcurrencyTrace(limit=16)
    at = 0.0
    for step in range(1_000):
        at += 0.01
        trace.started(at)
        if step == 500:
            for _ in range(5):
                trace.started(at)
            for _ in range(5):
                trace.ended(at)
        trace.ended(at)
    achieved = trace.achieved()
    assert len(achieved.samples) < 16 and achieved.stride > 1
    assert achieved.peak == 6 and trace.running == 0
    offsets = [s.t_seconds for s in achieved.samples]
    assert offsets == sorted(offsets)
    assert max(s.running for s in achieved.samples) <= achieved.peak


def test_only_open_starts_that_found_no_free_slot_count_late():
    clock = FakeClock()
    opened = RunLoad(StartSchedule(load_profile(concurrency=1, arrival_rate=10.0),
                                   clock=clock, sleep=clock.sleep))
    on_time = turns(opened.schedule, 1)[0]
    opened.started(on_time, waited=False)
    clock.now = 1.0
    overdue = turns(opened.schedule, 1)[0]
    opened.started(overdue, waited=False)
    opened.started(None, waited=True)  # a retry: outside the profile
    achieved = opened.achieved()
    assert achieved.late_starts == 1
    assert achieved.late_start_max_seconds == pytest.approx(0.9)
    assert [s.running for s in achieved.samples] == [1, 2, 3]

    closed = RunLoad(StartSchedule(load_profile(concurrency=1, ramp_seconds=0.0),
                                   clock=clock, sleep=clock.sleep))
    closed.started(turns(closed.schedule, 1)[0], waited=True)  # waiting is a closed run's way
    assert closed.achieved().late_starts == 0


def test_the_summary_line_names_the_profile_and_what_it_achieved():
    achieved = AchievedConcurrency(peak=2, late_starts=3, late_start_max_seconds=1.25)
    line = load_line(load_profile(concurrency=4, arrival_rate=2.5, max_concurrency=2), achieved)
    assert line.startswith("load: open, 2.5 trial(s)/s, at most 2 at once; peak 2 running")
    assert "3 trial(s) started late" in line and "1.25 s" in line
    assert f"(the default above {DEFAULT_RAMP_ABOVE} concurrent)" in load_line(
        load_profile(concurrency=200))


def test_a_sweeps_cells_add_up_on_their_shared_clock():
    first, second = ConcurrencyTrace(), ConcurrencyTrace()
    first.started(0.0)
    second.started(0.5)
    second.late_start(0.2)
    first.ended(1.0)
    second.late_start(0.4)
    second.started(1.5)
    second.ended(2.0)
    second.ended(2.5)
    together = combined([first.achieved(), second.achieved()])
    assert [(s.t_seconds, s.running) for s in together.samples] == \
        [(0.0, 1), (0.5, 2), (1.0, 1), (1.5, 2), (2.0, 1), (2.5, 0)]
    assert together.peak == 2 and together.late_starts == 2
    assert together.late_start_max_seconds == pytest.approx(0.4)
    assert together.late_start_mean_seconds == pytest.approx(0.3)
    assert combined([]).peak == 0


def test_a_staged_sweep_starts_each_stage_under_the_profile_afresh():
    from types import SimpleNamespace

    from voicelab.execution._sweep import _schedules

    cells = [SimpleNamespace(cell_id=name) for name in ("a", "b", "c")]
    staged = SimpleNamespace(cells=cells, trials_of=lambda one: 2,
                             stages=[SimpleNamespace(cells=cells[:2]),
                                     SimpleNamespace(cells=cells[2:])])
    schedules = _schedules(staged, load_profile(concurrency=4, arrival_rate=1.0))
    assert schedules["a"] is schedules["b"] and schedules["c"] is not schedules["a"]
    flat = SimpleNamespace(cells=cells, trials_of=lambda one: 2, stages=[])
    assert len({id(s) for s in _schedules(flat, load_profile(concurrency=4)).values()}) == 1
