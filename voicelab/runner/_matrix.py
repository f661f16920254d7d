"""Scenario x persona x environment x trial matrices (`voice-evaluator sweep` / `plan`).

Every cell is an ordinary run bundle under the matrix run directory (``<cell id>/trial-NNN``);
``matrix-report.json`` aggregates them. All cells are loaded and validated before anything runs
(:func:`plan_matrix`); running them is :func:`voicelab.execution.arun_matrix`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .._exit_codes import exit_code_after_writing
from .._limits import MAX_CONCURRENCY, MAX_TRIALS
from .._validate import RunPlan, validate_run
from ..artifacts import (
    MatrixReport,
)
from ..config import (
    LoadedRun,
    LoadedSuite,
    SecretScrubber,
    StageConfig,
    StatisticsConfig,
    cell_overrides,
    check_names_unique,
    load_run,
    load_suite,
    pricing_overrides,
    recorded_overrides,
)
from ._run import (
    RunOutcome,
    bounded_count,
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


