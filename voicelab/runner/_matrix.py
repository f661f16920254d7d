"""Scenario x persona x environment x trial matrices (`voice-evaluator sweep` / `plan`).

Every cell is an ordinary run bundle under the matrix run directory (``<cell id>/trial-NNN``);
``matrix-report.json`` aggregates them. All cells are loaded and validated before anything runs
(:func:`plan_matrix`); running them is :func:`voicelab.execution.arun_matrix`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._exit_codes import exit_code_after_writing, staged_sweep_exit_code, sweep_exit_code
from .._limits import MAX_CONCURRENCY, MAX_TRIALS
from .._location import as_local_path, is_url
from .._validate import RunPlan, validate_run
from ..artifacts import (
    MATRIX_REPORT,
    BudgetState,
    EndpointingCurve,
    EndpointingPoint,
    MarginPassRate,
    MatrixCell,
    MatrixReport,
    PassRate,
    Redacts,
    StageOutcome,
    check_tree,
    filter_model,
    open_location,
    published_location,
    read_json,
    read_remote_json,
    resolve_latest,
    resolve_local_latest,
    write_report_file,
)
from ..config import (
    LoadedRun,
    LoadedSuite,
    LowerBoundGate,
    MinPassRateGate,
    SecretScrubber,
    StageConfig,
    StatisticsConfig,
    cell_overrides,
    check_names_unique,
    load_run,
    load_suite,
    parse_settings,
    pricing_overrides,
    recorded_overrides,
)
from ..cost import merged_summary
from ..errors import ConfigError
from ..scoring import curve_of, pass_rate
from ._run import (
    RunOutcome,
    bounded_count,
    utc_now,
)
from ._select import TrialSelection

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class MatrixCellPlan:
    cell_id: str
    plan: RunPlan
    scenario: str
    persona: str
    environment: str
    #: a suite's ``endpointing`` axis: the pause length of this cell's hesitation turn
    pause_seconds: float | None = None
    #: a staged suite: the stage the cell runs in, and its trials (None: the matrix's)
    stage: str | None = None
    trials: int | None = None


@dataclass
class StagePlan:
    """One stage of a staged suite: its configuration and its cells."""

    config: StageConfig
    cells: list[MatrixCellPlan]
    trials: int

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def conversations(self) -> int:
        return len(self.cells) * self.trials


@dataclass
class MatrixPlan:
    suite: LoadedSuite
    cells: list[MatrixCellPlan]
    trials: int
    concurrency: int
    estimated_user_audio_seconds: float
    estimated_product_audio_seconds: float
    #: the suite's ``statistics``, else the base run's (every cell reports with it)
    statistics: StatisticsConfig = field(default_factory=StatisticsConfig)
    #: the ``--set`` overrides every cell was loaded with (as given)
    overrides: tuple[str, ...] = ()
    #: ``--only`` (:meth:`select`): its expressions, and the trial numbers chosen per cell id
    only: tuple[str, ...] = ()
    selected_trials: dict[str, list[int]] | None = None

    def select(self, selection: TrialSelection) -> MatrixPlan:
        """The plan of the cells and trials ``selection`` chooses (``--only``); a selection
        that chooses nothing is a :class:`~voicelab.errors.ConfigError`."""
        if selection.everything:
            return self
        chosen: dict[str, list[int]] = {}
        for cell in self.cells:
            loaded = cell.plan.loaded
            trials = selection.trials(scenario=loaded.scenario.id, persona=loaded.persona.name,
                                      environment=loaded.environment.name or "quiet",
                                      count=self.trials, cell_id=cell.cell_id)
            if trials:
                chosen[cell.cell_id] = trials
        if not chosen:
            raise selection.nothing_selected(f"the suite {self.suite.path.name}")
        return replace(self, cells=[c for c in self.cells if c.cell_id in chosen],
                       only=selection.expressions, selected_trials=chosen)
    #: a staged suite's stages, in order (their cells are ``cells``, stage by stage)
    stages: list[StagePlan] = field(default_factory=list)

    def recorded_overrides(self) -> list[str]:
        """The overrides as the matrix report keeps them, masked with every cell's secrets."""
        secrets = {value for cell in self.cells
                   for value in cell.plan.loaded.scrubber.secret_values}
        return recorded_overrides(self.overrides, SecretScrubber(secrets))

    @property
    def conversations(self) -> int:
        if self.selected_trials is not None:
            return sum(len(trials) for trials in self.selected_trials.values())
        if self.stages:
            return sum(stage.conversations for stage in self.stages)
        return len(self.cells) * self.trials

    def trials_of(self, cell: MatrixCellPlan) -> int:
        """The trials ``cell`` runs (its stage's, else the matrix's)."""
        return cell.trials if cell.trials is not None else self.trials

    @property
    def dimensions(self) -> tuple[int, int, int, int]:
        scenarios = len({c.scenario for c in self.cells})
        personas = len({c.persona for c in self.cells})
        environments = len({c.environment for c in self.cells})
        return scenarios, personas, environments, self.trials

    def lines(self) -> list[str]:
        s, p, e, k = self.dimensions
        total_minutes = (self.estimated_user_audio_seconds
                         + self.estimated_product_audio_seconds) / 60.0
        stages = [f"stages       {len(self.stages)}: " + ", ".join(
            f"{stage.name} ({len(stage.cells)} cell(s) x {stage.trials} trial(s), gate "
            f"{stage.config.gate_text()})" for stage in self.stages)] if self.stages else []
        return [
            f"suite        {self.suite.suite.name or self.suite.path.stem}",
            f"matrix       {s} scenario(s) x {p} persona(s) x {e} environment(s) x {k} trial(s)",
            *stages,
            f"cells        {len(self.cells)}",
            f"conversations {self.conversations}"
        + (f" (--only {' or '.join(self.only)})" if self.only else ""),
            f"audio        ~{self.estimated_user_audio_seconds / 60.0:.1f} min user speech + "
            f"~{self.estimated_product_audio_seconds / 60.0:.1f} min product speech = "
            f"~{total_minutes:.1f} min",
            f"concurrency  {self.concurrency}",
        ]


@dataclass
class MatrixOutcome:
    """What a sweep produced: its matrix report, its folder and each cell's run outcome."""

    report: MatrixReport
    run_dir: Path
    cells: list[RunOutcome] = field(default_factory=list)
    write_errors: list[str] = field(default_factory=list)
    #: the sweep folder, or its store URL (``run_dir`` is then the staging folder, removed)
    location: str = ""

    def __post_init__(self) -> None:
        self.location = self.location or str(self.run_dir)

    @property
    def exit_code(self) -> int:
        return exit_code_after_writing(self.report.exit_code,
                                       write_failed=bool(self.write_errors))


class MatrixInterrupted(asyncio.CancelledError):
    """The sweep was cancelled after writing what it had; ``outcome`` is the partial matrix."""

    def __init__(self, outcome: MatrixOutcome):
        super().__init__(f"matrix interrupted; partial results at {outcome.run_dir}")
        self.outcome = outcome


#: Longest name part of a cell folder (scenario, persona and environment each); longer names
#: are cut and given a digest so they stay unique (file systems allow 255 bytes per component).
CELL_PART_MAX_CHARS = 60


def _safe(text: str) -> str:
    """A file-name-safe part of a cell id: no separators, no leading dots (``..`` is not a
    folder name to create), at most :data:`CELL_PART_MAX_CHARS` characters."""
    safe = _UNSAFE.sub("-", text).strip("-.") or "x"
    if len(safe) > CELL_PART_MAX_CHARS:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        safe = f"{safe[:CELL_PART_MAX_CHARS - 9].rstrip('-.')}-{digest}"
    return safe


def _words_seconds(text: str) -> float:
    """Speaking time at a typical conversational rate (150 words a minute)."""
    return len(text.split()) * 0.4


def _estimate(loaded: LoadedRun, *, user_turn_seconds: float, response_seconds: float
              ) -> tuple[float, float]:
    turns = min(loaded.scenario.conversation.max_turns,
                loaded.scenario.eval_spec.limits.max_turns or 10**6)
    if loaded.script is not None and loaded.run.persona_mode == "scripted":
        spoken = [_words_seconds(t.response) for t in loaded.script.turns][:turns]
        user = sum(spoken)
        responses = len(spoken) + (1 if loaded.scenario.conversation.first_speaker == "product"
                                   else 0)
    else:
        user = turns * user_turn_seconds
        responses = turns + 1
    return user, responses * response_seconds


def plan_matrix(suite: str | Path | LoadedSuite, *, trials: int | None = None,
                concurrency: int | None = None, overrides: Sequence[str] = ()) -> MatrixPlan:
    """Load and validate every cell; nothing runs and nothing connects."""
    loaded_suite = suite if isinstance(suite, LoadedSuite) else load_suite(suite)
    spec = loaded_suite.suite
    k = bounded_count(trials if trials is not None else spec.trials, low=1, high=MAX_TRIALS,
                 key="trials", source=None if trials is not None else loaded_suite.path)
    parallel = bounded_count(concurrency if concurrency is not None else spec.concurrency, low=1,
                        high=MAX_CONCURRENCY, key="concurrency",
                        source=None if concurrency is not None else loaded_suite.path)
    cells: list[MatrixCellPlan] = []
    user_seconds = product_seconds = 0.0
    statistics = [] if spec.statistics is None else [
        f"statistics.confidence={spec.statistics.confidence!r}",
        f"statistics.interval={spec.statistics.interval}"]
    axis = spec.endpointing
    pauses: list[float | None] = list(axis.pause_seconds) if axis is not None else [None]
    stages: list[StagePlan] = []
    # a staged suite runs its matrix once per stage, the stage's overrides on every cell
    passes: list[StageConfig | None] = list(spec.stages) or [None]
    for stage in passes:
        stage_trials = k if trials is not None or stage is None or stage.trials is None \
            else stage.trials
        first = len(cells)
        for scenario in loaded_suite.scenarios:
            for persona in loaded_suite.personas:
                for environment in loaded_suite.environments:
                    for pause in pauses:
                        hesitation = [] if axis is None or pause is None else \
                            [f"script.turns.{axis.turn}.pauses=[{pause!r}]"]
                        loaded = load_run(spec.base, overrides=[
                            *cell_overrides(scenario, persona, environment), *hesitation,
                            *statistics, *pricing_overrides(spec),
                            *(stage.set_overrides() if stage is not None else []),
                            *overrides])
                        run_plan = validate_run(loaded)
                        env_name = loaded.environment.name or (
                            loaded.run.environment_path.stem if loaded.run.environment_path
                            else "quiet")
                        parts = [loaded.scenario.id, loaded.persona.name, env_name]
                        if pause is not None:
                            parts.append(f"pause-{round(pause * 1000):05d}ms")
                        if stage is not None:
                            parts.insert(0, stage.name)
                        cell_id = "__".join(_safe(x) for x in parts)
                        cells.append(MatrixCellPlan(
                            cell_id, run_plan, loaded.scenario.id, loaded.persona.name,
                            env_name, pause, stage=stage.name if stage is not None else None,
                            trials=stage_trials if stage is not None else None))
                        user, product = _estimate(
                            loaded, user_turn_seconds=spec.assumed_user_turn_seconds,
                            response_seconds=spec.assumed_response_seconds)
                        user_seconds += (user + (pause or 0.0)) * stage_trials
                        product_seconds += product * stage_trials
        if stage is not None:
            stages.append(StagePlan(stage, cells[first:], stage_trials))
    check_names_unique([c.cell_id for c in cells], source=loaded_suite.path,
                       key="scenarios/personas/environments")
    return MatrixPlan(loaded_suite, cells, k, parallel, user_seconds, product_seconds,
                      cells[0].plan.loaded.run.statistics, overrides=tuple(overrides),
                      stages=stages)


def matrix_rates(cells: list[MatrixCell], statistics: StatisticsConfig
                 ) -> tuple[PassRate, list[MarginPassRate]]:
    """The pooled pass rate of the cells' counted trials, and the same per scenario, persona
    and environment (the margins of the matrix)."""
    def pooled(group: list[MatrixCell]) -> PassRate:
        rates = [c.pass_rate for c in group if c.pass_rate is not None]
        return pass_rate(sum(r.passed for r in rates), sum(r.n for r in rates), statistics)

    margins = []
    for dimension in ("scenario", "persona", "environment"):
        values = sorted({getattr(c, dimension) for c in cells})
        for value in values:
            group = [c for c in cells if getattr(c, dimension) == value]
            margins.append(MarginPassRate(dimension=dimension, value=value,
                                          cells=len(group), pass_rate=pooled(group)))
    return pooled(cells), margins


def matrix_cell(outcome: RunOutcome, *, bundle_path: str,
                pause_seconds: float | None = None, stage: str | None = None) -> MatrixCell:
    """A sweep's line for one of its runs (a cell), from the run's report."""
    report = outcome.report
    return MatrixCell(pause_seconds=pause_seconds, stage=stage, cost=report.cost,
        cell_id=Path(outcome.bundle_path).name, scenario=report.scenario_id,
        persona=report.persona, environment=report.environment, bundle_path=bundle_path,
        trial_count=report.trial_count, executed_trials=report.executed_trials,
        passed_trials=report.passed_trials, pass_at_k=report.pass_at_k,
        pass_power_k=report.pass_power_k, exit_code=report.exit_code,
        suite_hash=report.suite_hash, pass_rate=report.pass_rate, pass_curve=report.pass_curve)


def matrix_report(plan: MatrixPlan, *, run_id: str, run_dir: Path, outcomes: list[RunOutcome],
                   started: str, status: str, label: str | None = None,
                   resumed_at: Sequence[str] = (), stages: Sequence[StageOutcome] = (),
                   budget: BudgetState | None = None) -> MatrixReport:
    """The sweep's report of the cells that ran (``outcomes``); a staged sweep's ``stages``
    (those that ran and those that did not), the sweep's ``budget``."""
    planned = {cell.cell_id: cell for cell in plan.cells}
    cells = sorted((matrix_cell(o, bundle_path=published_location(o.bundle_path),
                                pause_seconds=_planned(planned, o, "pause_seconds"),
                                stage=_planned(planned, o, "stage"))
                    for o in outcomes), key=lambda c: c.cell_id)
    pooled, margins = matrix_rates(cells, plan.statistics)
    complete = len(cells) == len(plan.cells)
    stopped = budget is not None and budget.trials_not_started > 0
    if plan.stages:
        code = staged_exit_code([c.exit_code for c in cells], stages,
                                interrupted=status == "interrupted")
    else:
        code = sweep_exit_code([c.exit_code for c in cells], planned_cells=len(plan.cells),
                               interrupted=status == "interrupted")
    s, p, e, k = plan.dimensions
    return MatrixReport(
        name=plan.suite.suite.name or plan.suite.path.stem, run_id=run_id,
        status=status,
        suite_path=str(plan.suite.path), run_dir=published_location(run_dir),
        started_at=started,
        ended_at=utc_now(), scenarios=sorted({c.scenario for c in plan.cells}),
        personas=sorted({c.persona for c in plan.cells}),
        environments=sorted({c.environment for c in plan.cells}), trials_per_cell=k,
        overrides=plan.recorded_overrides(),
        cell_count=len(plan.cells), conversations=plan.conversations, only=list(plan.only),
        passed_trials=sum(c.passed_trials for c in cells),
        executed_trials=sum(c.executed_trials for c in cells),
        pass_at_k=complete and all(c.pass_at_k for c in cells),
        pass_power_k=complete and all(c.pass_power_k for c in cells), exit_code=code,
        cells=cells, label=label, resumed_at=list(resumed_at), pass_rate=pooled,
        margins=margins,
        endpointing=matrix_endpointing(outcomes) if plan.suite.suite.endpointing else None,
        cost=merged_summary(c.cost for c in cells), stopped="budget" if stopped else None,
        budget=budget, stages=list(stages) if plan.stages else None)


def _planned(planned: dict[str, MatrixCellPlan], outcome: RunOutcome, name: str) -> Any:
    cell = planned.get(Path(outcome.bundle_path).name)
    return getattr(cell, name) if cell is not None else None


def staged_exit_code(cell_codes: list[int], stages: Sequence[StageOutcome], *,
                     interrupted: bool) -> int:
    """A staged sweep's code (:func:`voicelab._exit_codes.staged_sweep_exit_code`)."""
    return staged_sweep_exit_code(
        cell_codes, interrupted=interrupted,
        gate_failed=any(stage.status == "failed" for stage in stages),
        budget_stopped=any(stage.reason.startswith(BUDGET_REASON) for stage in stages))


#: How a stage's ``reason`` begins when the budget stopped it (or kept it from running).
BUDGET_REASON = "budget"


def stage_outcome(stage: StagePlan, cells: Sequence[MatrixCell], statistics: StatisticsConfig,
                  *, budget_stopped: bool = False) -> StageOutcome:
    """A stage that ran, judged by its gate on its cells (``cells``: those of the stage that
    ran): ``failed`` also when some of its planned trials did not run."""
    gate = stage.config.gate
    trials = sum(c.executed_trials for c in cells)
    passed = sum(c.passed_trials for c in cells)
    planned_trials = stage.conversations
    complete = len(cells) == len(stage.cells) and \
        all(c.executed_trials >= c.trial_count for c in cells)
    pooled, _ = matrix_rates(list(cells), statistics)
    if not complete:
        ok = False
        reason = (f"{BUDGET_REASON}: {planned_trials - trials} of its {planned_trials} trial(s) "
                  f"were not started") if budget_stopped else \
            f"{planned_trials - trials} of its {planned_trials} trial(s) did not run"
    elif isinstance(gate, MinPassRateGate):
        rate = pooled.estimate
        ok = rate is not None and rate >= gate.min_pass_rate
        reason = f"pass rate {_rate(rate)} {'>=' if ok else '<'} {gate.min_pass_rate:g}"
    elif isinstance(gate, LowerBoundGate):
        low = pooled.low
        ok = low is not None and low >= gate.min_lower_bound
        reason = (f"pass-rate interval [{_rate(low)}, {_rate(pooled.high)}] "
                  f"({pooled.confidence:.0%} {pooled.method}): lower bound "
                  f"{'>=' if ok else '<'} {gate.min_lower_bound:g}")
    else:
        ok = all(c.pass_power_k for c in cells)
        failing = [c.cell_id for c in cells if not c.pass_power_k]
        reason = "every trial passed" if ok else \
            f"{len(failing)} cell(s) with a trial that did not pass: {', '.join(failing[:3])}" \
            + (" ..." if len(failing) > 3 else "")
    return StageOutcome(name=stage.name, status="passed" if ok else "failed",
                        gate=stage.config.gate_text(), reason=reason, cells=len(cells),
                        trials=trials, passed_trials=passed,
                        cost=merged_summary(c.cost for c in cells))


def stage_not_run(stage: StagePlan, *, because: str) -> StageOutcome:
    """A stage after the one that stopped the sweep."""
    return StageOutcome(name=stage.name, status="not_run", gate=stage.config.gate_text(),
                        reason=because)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def matrix_endpointing(outcomes: Sequence[RunOutcome]) -> list[EndpointingCurve]:
    """One endpointing curve per scenario x persona x environment of a swept suite: the
    points its cells measured (each cell one pause length)."""
    groups: dict[tuple[str, str, str], list[EndpointingPoint]] = {}
    for outcome in outcomes:
        report = outcome.report
        key = (report.scenario_id, report.persona, report.environment)
        points = groups.setdefault(key, [])
        if report.endpointing is not None:
            points.extend(report.endpointing.points)
    return [curve_of(points, scenario=scenario, persona=persona, environment=environment)
            for (scenario, persona, environment), points in sorted(groups.items())]


def read_matrix_report(run_dir: str | Path) -> MatrixReport:
    """The matrix report of a sweep folder (or store URL)."""
    if is_url(run_dir):
        folder = open_location(run_dir, key="resume")
        assert not isinstance(folder, Path)
        document = read_remote_json(resolve_latest(folder).child(MATRIX_REPORT))
        remote: MatrixReport = parse_settings(MatrixReport, document, key=None,
                                              source=folder.url)
        return remote
    path = resolve_local_latest(as_local_path(run_dir)).expanduser().resolve() \
        / MATRIX_REPORT
    check_tree(path.parent)  # regular files and folders only, before anything is read
    if not path.is_file():
        raise ConfigError("not a sweep (no matrix-report.json)", source=path.parent)
    report: MatrixReport = parse_settings(MatrixReport, read_json(path), key=None, source=path)
    return report


async def conclude_cells(tasks: list[asyncio.Task[None]], outcomes: list[RunOutcome], *,
                         run_dir: Path, write_errors: list[str],
                         report: Callable[[str], MatrixReport], words: Redacts | None = None,
                         written: Callable[[], None] | None = None) -> MatrixOutcome:
    """Await a sweep's cells, write its final ``matrix-report.json`` (``report(status)``,
    through ``words``, the sweep's filter of words), call ``written`` once it is on disk (the
    sweep's ``latest`` moves last) and return its outcome; raises the first cell's failure,
    or :class:`MatrixInterrupted` when the sweep was interrupted (after every cell has written
    its evidence)."""
    interrupted = False
    failure: BaseException | None = None
    try:
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, asyncio.CancelledError):
                interrupted = True
            elif isinstance(result, BaseException) and failure is None:
                failure = result
    except asyncio.CancelledError:
        interrupted = True  # gather already cancelled the cells once: let them write
        await asyncio.gather(*tasks, return_exceptions=True)
    for cell_outcome in outcomes:
        write_errors.extend(cell_outcome.write_errors)
    final = report("interrupted" if interrupted else "complete")
    if words is not None:
        final = filter_model(final, words)
    final_error = write_report_file(run_dir / MATRIX_REPORT, final)
    if final_error:
        write_errors.append(final_error)
    elif written is not None:
        written()
    if failure is not None:
        raise failure
    outcome = MatrixOutcome(final, run_dir, sorted(outcomes, key=lambda o: str(o.bundle_path)),
                            write_errors)
    if interrupted:
        raise MatrixInterrupted(outcome)
    return outcome
