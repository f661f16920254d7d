"""Load profiles: when a run starts its trials, and the concurrency that achieved.

Two models, as load-testing tools have them (docs/load-profiles.md):

- **closed** (k6's ramping VUs, Locust's spawn rate): at most ``max_concurrency`` trials at
  once; the first ``max_concurrency`` start evenly over ``ramp_seconds`` (0: all at once), each
  later one as soon as a running one ends.
- **open** (k6's arrival-rate executors): the k-th trial is due ``k / rate`` seconds after the
  first, however long the others take, with at most ``max_concurrency`` at once. A trial whose
  arrival finds no free slot starts when one frees and is counted late (k6 counts it as a
  dropped iteration; voicelab never skips what the user asked for).

The run's own trials pull their starts from one :class:`StartSchedule` (a sweep's cells share
one), so every executor honours a profile: the parent decides when a trial is submitted, and
the executor runs it from then on. :class:`ConcurrencyTrace` records the trials running after
every start and end, bounded for huge runs.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .._limits import MAX_ARRIVAL_RATE, MAX_RAMP_SECONDS
from ..artifacts import AchievedConcurrency, ConcurrencySample, LoadProfile
from ..errors import ConfigError

#: Above this many concurrent trials a run ramps up by default: trials opening their calls
#: together keep the loop busy while their greetings arrive, and the arrivals stamped then are
#: late (benchmarks/README.md has the figures).
DEFAULT_RAMP_ABOVE = 20
#: The default ramp starts one trial every this many seconds (50 starts a second): four times
#: the start spacing of one event loop (:mod:`._start_spacing`), so an opening conversation's
#: connect, handshake and greeting is over before the next one's begins.
DEFAULT_RAMP_SECONDS_PER_TRIAL = 0.02
#: A run's concurrency trace keeps at most this many samples (then every other one, and so on).
MAX_CONCURRENCY_SAMPLES = 2_000


def load_profile(*, concurrency: int, ramp_seconds: float | None = None,
                 arrival_rate: float | None = None,
                 max_concurrency: int | None = None, trials: int | None = None) -> LoadProfile:
    """The profile of a run of ``concurrency`` the caller gave ``ramp_seconds`` or
    ``arrival_rate`` (with ``max_concurrency``, default ``concurrency``), or neither: all at
    once, ramped by default when more than :data:`DEFAULT_RAMP_ABOVE` trials would start
    together (the concurrency, or the ``trials`` to run when they are fewer). Raises
    :class:`ConfigError` (its key the option's) for both at once and for a number out of
    range."""
    if ramp_seconds is not None and arrival_rate is not None:
        raise ConfigError("a closed ramp (--ramp) and an open arrival rate (--arrival-rate) "
                          "exclude each other: give one", key="arrival_rate")
    if max_concurrency is not None and arrival_rate is None:
        raise ConfigError("goes with --arrival-rate (a closed run's is --concurrency)",
                          key="max_concurrency")
    if arrival_rate is not None:
        rate = _number(arrival_rate, key="arrival_rate", high=MAX_ARRIVAL_RATE, zero=False)
        most = concurrency if max_concurrency is None else max_concurrency
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise ConfigError(f"must be a whole number of at least 1, got {most!r}",
                              key="max_concurrency")
        return LoadProfile(kind="open", arrival_rate_per_second=rate, max_concurrency=most)
    if ramp_seconds is not None:
        ramp = _number(ramp_seconds, key="ramp_seconds", high=MAX_RAMP_SECONDS, zero=True)
        return LoadProfile(kind="closed", ramp_seconds=ramp, max_concurrency=concurrency)
    together = min(concurrency, trials) if trials is not None else concurrency
    if together > DEFAULT_RAMP_ABOVE:
        return LoadProfile(kind="closed", max_concurrency=concurrency, chosen_by="default",
                           ramp_seconds=round(together * DEFAULT_RAMP_SECONDS_PER_TRIAL, 3))
    return LoadProfile(kind="closed", ramp_seconds=0.0, max_concurrency=concurrency)


def _number(value: float, *, key: str, high: float, zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not (value >= 0 if zero else value > 0) or value > high:
        low = "0 or more" if zero else "more than 0"
        raise ConfigError(f"must be a number {low} and at most {high:g}, got {value!r}",
                          key=key)
    return float(value)


def resumed_profile(recorded: LoadProfile | None, *, concurrency: int,
                    trials: int | None = None) -> LoadProfile:
    """The profile a resumed run keeps: the one it was started with (its concurrency the
    resumed run's), or the default of a bundle written before profiles were recorded."""
    if recorded is None:
        return load_profile(concurrency=concurrency, trials=trials)
    if recorded.kind == "closed":
        return recorded.model_copy(update={"max_concurrency": concurrency,
                                           "chosen_by": "resumed"})
    return recorded.model_copy(update={"chosen_by": "resumed"})


@dataclass(frozen=True)
class Turn:
    """A trial's start slot: when it was ``due`` and when a free trial loop ``asked`` for it
    (both on the schedule's clock); asked after it was due, no slot was free in time."""

    due: float
    asked: float

    @property
    def late(self) -> bool:
        return self.asked > self.due


class StartSchedule:
    """When each next trial may start under ``profile`` (shared by the runs of a sweep) for
    a run of ``trials``. ``clock`` and ``sleep`` are the event loop's (a test gives a fake clock)."""

    def __init__(self, profile: LoadProfile, *, trials: int | None = None,
                 clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None):
        self.profile = profile
        #: a closed ramp spreads this many starts over its period: the concurrency, or the
        #: ``trials`` to run when they are fewer
        self._ramped = max(1, min(profile.max_concurrency, trials or profile.max_concurrency))
        self._clock = clock
        self._sleep = sleep if sleep is not None else asyncio.sleep
        self._origin: float | None = None
        self._given = 0

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @property
    def origin(self) -> float | None:
        """When the first trial asked to start (None before)."""
        return self._origin

    def due(self, k: int, asked: float) -> float:
        """When the ``k``-th start (from 0) is due, asked for at ``asked``."""
        origin = asked if self._origin is None else self._origin
        profile = self.profile
        if profile.kind == "open":
            assert profile.arrival_rate_per_second is not None
            return origin + k / profile.arrival_rate_per_second
        ramp = profile.ramp_seconds or 0.0
        if k >= self._ramped or ramp == 0.0:
            return asked  # the ramp is over: a trial starts when a running one ends
        return origin + k * ramp / self._ramped

    async def turn(self) -> Turn:
        """Wait for the next start slot."""
        asked = self.now()
        due = self.due(self._given, asked)
        if self._origin is None:
            self._origin = asked
        self._given += 1
        if due > asked:
            await self._sleep(due - asked)
        return Turn(due=due, asked=asked)


class ConcurrencyTrace:
    """Trials running over time and starts that were late, bounded in size: past
    :data:`MAX_CONCURRENCY_SAMPLES` it keeps every other sample and samples half as often."""

    def __init__(self, *, limit: int = MAX_CONCURRENCY_SAMPLES):
        self._limit = max(2, limit)
        self._samples: list[ConcurrencySample] = []
        self._stride = 1
        self._changes = 0
        self.running = 0
        self.peak = 0
        self._late = 0
        self._late_total = 0.0
        self._late_max = 0.0

    def started(self, at_seconds: float) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self._sample(at_seconds)

    def ended(self, at_seconds: float) -> None:
        self.running -= 1
        self._sample(at_seconds)

    def late_start(self, by_seconds: float) -> None:
        self._late += 1
        self._late_total += max(0.0, by_seconds)
        self._late_max = max(self._late_max, by_seconds)

    def _sample(self, at_seconds: float) -> None:
        self._changes += 1
        if self._changes % self._stride:
            return
        self._samples.append(ConcurrencySample(t_seconds=round(max(0.0, at_seconds), 4),
                                               running=self.running))
        if len(self._samples) >= self._limit:
            self._samples = self._samples[::2]
            self._stride *= 2

    def achieved(self) -> AchievedConcurrency:
        late = self._late
        return AchievedConcurrency(
            samples=list(self._samples), stride=self._stride, peak=self.peak, late_starts=late,
            late_start_max_seconds=round(self._late_max, 4) if late else None,
            late_start_mean_seconds=round(self._late_total / late, 4) if late else None)


class RunLoad:
    """One run's side of its load profile: the schedule its first pass starts trials from
    (its own, or its sweep's) and the trace of what that achieved, on the schedule's clock."""

    def __init__(self, schedule: StartSchedule):
        self.schedule = schedule
        self.trace = ConcurrencyTrace()

    @property
    def profile(self) -> LoadProfile:
        return self.schedule.profile

    async def turn(self) -> Turn:
        return await self.schedule.turn()

    def _offset(self) -> float:
        origin = self.schedule.origin
        now = self.schedule.now()
        return 0.0 if origin is None else now - origin

    def started(self, turn: Turn | None, *, waited: bool) -> None:
        """A trial starts now: in its ``turn`` (None: a retry, outside the profile); ``waited``
        for a slot the run's concurrency (or its sweep's) had not free when it asked. Only an
        open profile's starts can be late: a closed one's trials wait for a slot by design."""
        if turn is not None and self.profile.kind == "open" and (turn.late or waited):
            self.trace.late_start(self.schedule.now() - turn.due)
        self.trace.started(self._offset())

    def ended(self) -> None:
        self.trace.ended(self._offset())

    def achieved(self) -> AchievedConcurrency:
        return self.trace.achieved()


def load_line(profile: LoadProfile, achieved: AchievedConcurrency | None = None) -> str:
    """The profile in words, with what it achieved: the run's log and the command line's
    summary say it the same way."""
    if profile.kind == "open":
        text = (f"load: open, {profile.arrival_rate_per_second:g} trial(s)/s, at most "
                f"{profile.max_concurrency} at once")
    else:
        text = f"load: closed, {profile.max_concurrency} at once, ramp " \
               f"{profile.ramp_seconds or 0:g} s"
    if profile.chosen_by == "default":
        text += f" (the default above {DEFAULT_RAMP_ABOVE} concurrent)"
    elif profile.chosen_by == "resumed":
        text += " (kept from the run resumed)"
    if achieved is not None:
        text += f"; peak {achieved.peak} running"
        if achieved.late_starts:
            text += (f"; {achieved.late_starts} trial(s) started late (no free slot at their "
                     f"arrival), up to {achieved.late_start_max_seconds or 0:.2f} s")
    return text


def combined(achieved: Sequence[AchievedConcurrency]) -> AchievedConcurrency:
    """What several runs on one clock achieved together (a sweep's cells): their running
    counts summed at every sample, their late starts pooled. Bounded like a run's trace; the
    peak is the summed samples' (exact unless a cell kept only every ``stride``-th change)."""
    events = sorted((sample.t_seconds, index, sample.running)
                    for index, one in enumerate(achieved) for sample in one.samples)
    running = [0] * len(achieved)
    samples: list[ConcurrencySample] = []
    for at, index, count in events:
        running[index] = count
        samples.append(ConcurrencySample(t_seconds=at, running=sum(running)))
    stride = 1
    while len(samples) >= MAX_CONCURRENCY_SAMPLES:
        samples, stride = samples[::2], stride * 2
    late = sum(one.late_starts for one in achieved)
    delays = [(one.late_start_mean_seconds or 0.0) * one.late_starts for one in achieved]
    return AchievedConcurrency(
        samples=samples, stride=max([stride, *(one.stride for one in achieved)]),
        peak=max((s.running for s in samples), default=0), late_starts=late,
        late_start_max_seconds=max((one.late_start_max_seconds for one in achieved
                                    if one.late_start_max_seconds is not None), default=None),
        late_start_mean_seconds=round(sum(delays) / late, 4) if late else None)
