"""The statistics of a run report: intervals, the pass@k / pass^k curve, per-verdict rates,
judge-corrected rates and the run config's gates.

Pure functions of trial reports and their per-response metrics, shared by the runner (while a
run goes and at its end, resumed or not) and ``rescore`` (which reads the settings back from the
report it rewrites). Which trials count: every trial that ran to an end, execution failures
included (a product that crashes fails); an interrupted trial (exit reason ``cancelled``) is left
out: it says nothing about the product, and ``run --resume`` runs it again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..artifacts import (
    GateCheck,
    JudgeCalibration,
    JudgeCorrectedRate,
    PassCurvePoint,
    PassRate,
    ProbeOutcome,
    ProbeRow,
    SelectivityRate,
    TrialReport,
    TurnMetrics,
    VerdictPassRate,
)
from ..config import GateConfig, StatisticsConfig
from ..errors import ConfigError
from ._judge_correction import METHOD as CORRECTION_METHOD
from ._judge_correction import corrected_rate
from ._selectivity import selectivity
from ._statistics import pass_curves, proportion_interval, quantile_bound
from ._verdicts import undecided_by_timing

PASS_RATE = "pass_rate"
#: Bootstrap replicates and seed of a judge-corrected rate in a run report.
CORRECTION_BOOTSTRAP = 2000
CORRECTION_SEED = 0


def _per_response_metrics() -> tuple[str, ...]:
    numeric = (float, float | None, int | None)
    return tuple(name for name, info in TurnMetrics.model_fields.items()
                 if info.annotation in numeric and name != "index"
                 and not name.endswith(_POSITIONS))


#: Where something happened on the listener timeline: a position, not a measurement.
_POSITIONS = ("_start_ms", "_end_ms")
#: What a run-config gate may name besides ``pass_rate``: the numeric measurements of a
#: response (voice-metrics.json ``turns``).
GATE_METRICS: tuple[str, ...] = _per_response_metrics()


def counts_toward_rates(exit_reason: str) -> bool:
    return exit_reason != "cancelled"


def pass_rate(passed: int, n: int, statistics: StatisticsConfig, *,
              inconclusive: int = 0) -> PassRate:
    """``inconclusive``: how many of the ``n - passed`` were undecided (counted as not passed,
    shown on their own)."""
    interval = proportion_interval(passed, n, confidence=statistics.confidence,
                                   method=statistics.interval)
    return PassRate(**interval.to_dict(), inconclusive=inconclusive)


def pass_curve(n: int, passed: int) -> list[PassCurvePoint]:
    return [PassCurvePoint(k=k, pass_at_k=at, pass_power_k=power)
            for k, (at, power) in pass_curves(n, passed).items()]


def settings_of(rate: PassRate | None) -> StatisticsConfig:
    """The statistics settings a report was written with (rescore keeps them)."""
    if rate is None:
        return StatisticsConfig()
    return StatisticsConfig(confidence=rate.confidence, interval=rate.method)


# --- gates ------------------------------------------------------------------------------------

def check_gate_metrics(gates: Sequence[GateConfig], *, source: str | Path | None) -> None:
    """A gate naming no known metric is a configuration error (one line, exit 2)."""
    for index, gate in enumerate(gates):
        if gate.metric != PASS_RATE and gate.metric not in GATE_METRICS:
            raise ConfigError(f"unknown metric {gate.metric!r}; expected pass_rate or a "
                              f"per-response metric: {', '.join(GATE_METRICS)}",
                              source=source, key=f"gates[{index}].metric")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _judge_pass_rate_gate(gate: GateConfig, rate: PassRate) -> GateCheck:
    limit = float(gate.min_lower_bound or 0.0)
    common = {"metric": PASS_RATE, "min_lower_bound": limit, "observed": rate.estimate,
              "bound": rate.low, "method": rate.method, "confidence": rate.confidence,
              "n": rate.n}
    head = f"pass_rate lower bound >= {limit:.1%}"
    if rate.low is None:
        return GateCheck(status="inconclusive", message=f"{head}: no judged trial ran to an end, "
                         "nothing to judge", **common)
    observed = (f"{_percent(rate.estimate)} ({rate.passed}/{rate.n}), {rate.confidence:.0%} "
                f"{rate.method} interval {_percent(rate.low)} to {_percent(rate.high)}")
    if rate.low >= limit:
        return GateCheck(status="passed", message=f"{head}: {observed}", **common)
    why = "the whole interval is below it" if (rate.high or 0.0) < limit else \
        "the interval reaches below it (more trials narrow it)"
    return GateCheck(status="failed", message=f"{head}: {observed}: {why}", **common)


def _judge_quantile_gate(gate: GateConfig, values: Sequence[float],
                         statistics: StatisticsConfig) -> GateCheck:
    assert gate.quantile is not None
    upper = gate.max is not None
    limit = gate.max if gate.max is not None else gate.min
    assert limit is not None
    bound = quantile_bound(values, quantile=gate.quantile, confidence=statistics.confidence,
                           side="upper" if upper else "lower")
    label = f"p{gate.quantile * 100:g}"
    common = {"metric": gate.metric, "quantile": gate.quantile, "max": gate.max,
              "min": gate.min, "observed": bound.estimate, "bound": bound.bound,
              "method": bound.method, "confidence": bound.confidence, "n": bound.n,
              "needed": bound.needed}
    head = f"{gate.metric} {label} {bound.side} bound {'<=' if upper else '>='} {limit:g}"
    if bound.bound is None:
        observed = "no response has it" if bound.estimate is None else \
            f"observed {label} {bound.estimate:.1f} over {bound.n} responses"
        return GateCheck(status="inconclusive", message=(
            f"{head}: {observed}; a distribution-free {statistics.confidence:.0%} {bound.side} "
            f"bound of the {label} needs at least {bound.needed} responses"), **common)
    observed = (f"observed {label} {bound.estimate:.1f}, {statistics.confidence:.0%} "
                f"{bound.side} bound {bound.bound:.1f} (order statistic {bound.rank} of "
                f"{bound.n} responses)")
    within = bound.bound <= limit if upper else bound.bound >= limit
    return GateCheck(status="passed" if within else "failed", message=f"{head}: {observed}",
                     **common)


#: The latency metrics a cut-into hesitation turn has no value of (docs/endpointing.md): a
#: gate on them counts each cut-in as a response beyond its limit, never as a passing one.
CUT_IN_LATENCY_METRICS = ("response_latency_ms", "first_audio_latency_ms")


def judge_gates(gates: Sequence[GateConfig], *, rate: PassRate,
                responses: Mapping[str, Sequence[float]],
                statistics: StatisticsConfig, cut_ins: int = 0) -> list[GateCheck]:
    """Each gate on the conservative end: the pass rate's lower bound, a quantile's upper
    bound. ``responses``: the finite values of each per-response metric; ``cut_ins``: the
    hesitation turns the product cut into, each a value beyond the limit of a latency gate
    (the limit and 1 ms more; less for a ``min`` gate)."""
    checks = []
    for gate in gates:
        if gate.metric == PASS_RATE:
            checks.append(_judge_pass_rate_gate(gate, rate))
            continue
        values = list(responses.get(gate.metric, ()))
        barred = cut_ins if gate.metric in CUT_IN_LATENCY_METRICS else 0
        if barred:
            beyond = gate.max + 1.0 if gate.max is not None else float(gate.min or 0.0) - 1.0
            values += [beyond] * barred
        check = _judge_quantile_gate(gate, values, statistics)
        if barred:
            check = check.model_copy(update={"message": f"{check.message} ({barred} cut-in "
                                             f"turn(s) counted beyond the limit)"})
        checks.append(check)
    return checks


def gate_config_of(check: GateCheck) -> GateConfig:
    """The gate a recorded check judged (``rescore`` judges it again)."""
    return GateConfig(metric=check.metric, min_lower_bound=check.min_lower_bound,
                      quantile=check.quantile, max=check.max, min=check.min)


# --- judge-corrected rates --------------------------------------------------------------------

def read_calibration(path: str | Path) -> JudgeCalibration:
    """A calibration result: the JSON the calibration notebook writes (``output_path``), whose
    ``criterion`` and confusion counts ``tp``, ``fn``, ``fp``, ``tn`` are used."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("calibration file not found", source=path) from None
    except (OSError, ValueError, RecursionError) as error:  # ValueError: bad JSON, huge ints
        reason = "nested too deep" if isinstance(error, RecursionError) else error
        raise ConfigError(f"not a calibration result (JSON): {reason}", source=path) from None
    if not isinstance(document, Mapping):
        raise ConfigError("not a calibration result: expected a JSON object", source=path)
    fields = {key: document.get(key) for key in ("criterion", "tp", "fn", "fp", "tn")}
    try:
        calibration = JudgeCalibration.model_validate({**fields, "source": str(path.resolve())},
                                                      strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first.get("loc", ()))
        raise ConfigError(f"not a calibration result: {first.get('msg')}", source=path,
                          key=key or None) from None
    if calibration.tp + calibration.fn + calibration.fp + calibration.tn == 0:
        raise ConfigError("the calibration has no labeled item", source=path)
    return calibration


def judge_corrected_rates(reports: Sequence[TrialReport],
                          calibrations: Sequence[JudgeCalibration],
                          statistics: StatisticsConfig) -> list[JudgeCorrectedRate]:
    rates = []
    for calibration in calibrations:
        verdicts = [judge.passed for report in reports for judge in report.judges
                    if judge.name == calibration.criterion and judge.status != "error"]
        judged = pass_rate(sum(verdicts), len(verdicts), statistics)
        result = corrected_rate(sum(verdicts), len(verdicts), tp=calibration.tp,
                                fn=calibration.fn, fp=calibration.fp, tn=calibration.tn,
                                confidence=statistics.confidence,
                                n_bootstrap=CORRECTION_BOOTSTRAP, seed=CORRECTION_SEED)
        notes = []
        if not verdicts:
            notes.append("no verdict of this judge in the run")
        elif not math.isfinite(result.corrected):
            notes.append("sensitivity + specificity <= 1: the judge is no better than chance, "
                         "no corrected rate")
        if result.undefined_replicates:
            notes.append(f"{result.undefined_replicates} of {result.n_bootstrap} bootstrap "
                         "replicates had a judge no better than chance and are left out")

        def finite(value: float) -> float | None:
            return value if math.isfinite(value) else None

        rates.append(JudgeCorrectedRate(
            judge=calibration.criterion, judge_pass_rate=judged,
            corrected=finite(result.corrected), low=finite(result.low), high=finite(result.high),
            sensitivity=finite(result.sensitivity), specificity=finite(result.specificity),
            confidence=statistics.confidence, method=CORRECTION_METHOD,
            n_bootstrap=result.n_bootstrap, seed=result.seed, calibration=calibration,
            note="; ".join(notes)))
    return rates


# --- everything a run report holds ------------------------------------------------------------

@dataclass
class RunStatistics:
    pass_rate: PassRate
    pass_curve: list[PassCurvePoint] = field(default_factory=list)
    verdict_pass_rates: list[VerdictPassRate] = field(default_factory=list)
    gates: list[GateCheck] = field(default_factory=list)
    judge_corrected_pass_rates: list[JudgeCorrectedRate] = field(default_factory=list)
    selectivity: list[SelectivityRate] = field(default_factory=list)
    probes: list[ProbeRow] = field(default_factory=list)
    measurement_warnings: list[str] = field(default_factory=list)

    @property
    def blocking_gates(self) -> list[GateCheck]:
        return [gate for gate in self.gates if gate.status != "passed"]

    def report_fields(self) -> dict[str, Any]:
        return {"pass_rate": self.pass_rate, "pass_curve": self.pass_curve,
                "verdict_pass_rates": self.verdict_pass_rates, "gates": self.gates,
                "judge_corrected_pass_rates": self.judge_corrected_pass_rates,
                "selectivity": self.selectivity, "probes": self.probes,
                "measurement_warnings": self.measurement_warnings}


def measurement_warnings(reports: Sequence[TrialReport],
                         turns: Sequence[Sequence[TurnMetrics]],
                         gates_left_out: Mapping[str, int]) -> list[str]:
    """What the evaluator's own loop lag puts at stake, for the run's one warning line; empty
    when nothing: degraded responses whose errors cannot change a verdict or a gate and stay
    within the documented accuracy are only counted (``degraded_trials``, each trial's
    ``measurement_quality``). At stake: a timing verdict left inconclusive because its error
    straddles its limit; a timing gate judged without the degraded responses it left out; a
    response whose stated error exceeds :data:`~voicelab.metrics.DOCUMENTED_ACCURACY_MS`."""
    from ..metrics import DOCUMENTED_ACCURACY_MS

    warnings: list[str] = []
    undecided = sorted({v.name for report in reports for v in report.verdicts
                        if undecided_by_timing(v)})
    if undecided:
        trials = sum(any(undecided_by_timing(v) for v in report.verdicts) for report in reports)
        warnings.append(f"{trials} trial(s) have a timing verdict its possible error could "
                        f"change ({', '.join(undecided)}: inconclusive)")
    for metric, count in gates_left_out.items():
        if count:
            warnings.append(f"the {metric} gate left out {count} timing-degraded response(s)")
    # a response's stated error: its worst figure's own bound, else its stamps' (per stamp)
    bounds = [(index, max(metrics.figure_error_bounds_ms.values(), default=0.0)
               if metrics.figure_error_bounds_ms is not None
               else metrics.stamp_error_bound_ms or 0.0)
              for index, trial in enumerate(turns) for metrics in trial]
    beyond = [(index, bound) for index, bound in bounds if bound > DOCUMENTED_ACCURACY_MS]
    if beyond:
        worst = max(bound for _, bound in beyond)
        warnings.append(f"{len(beyond)} response(s) in {len({i for i, _ in beyond})} trial(s) "
                        f"may be off by more than the documented {DOCUMENTED_ACCURACY_MS:g} ms "
                        f"(up to {worst:.0f} ms)")
    return warnings


def verdict_pass_rates(reports: Sequence[TrialReport],
                       statistics: StatisticsConfig) -> list[VerdictPassRate]:
    """One rate per verdict name, over the trials that have it (inconclusive is not passed)."""
    counts: dict[str, list[int]] = {}
    critical: dict[str, bool] = {}
    for report in reports:
        for verdict in report.verdicts:
            if verdict.status == "not_applicable":
                continue
            tally = counts.setdefault(verdict.name, [0, 0, 0])
            tally[0] += int(verdict.passed)
            tally[1] += 1
            tally[2] += int(verdict.status == "inconclusive")
            critical[verdict.name] = critical.get(verdict.name, False) or verdict.critical
    return [VerdictPassRate(name=name, critical=critical[name],
                            pass_rate=pass_rate(passed, n, statistics, inconclusive=undecided))
            for name, (passed, n, undecided) in counts.items()]


def run_statistics(reports: Sequence[TrialReport], turns: Sequence[Sequence[TurnMetrics]], *,
                   statistics: StatisticsConfig, gates: Sequence[GateConfig] = (),
                   calibrations: Sequence[JudgeCalibration] = (),
                   curve: bool = True,
                   probes: Sequence[Sequence[ProbeOutcome]] | None = None) -> RunStatistics:
    """The statistics of one run's trials (``turns[i]``: the responses of ``reports[i]``).
    ``curve=False`` leaves the pass curve out (the running report, rewritten every second)."""
    if len(reports) != len(turns):
        raise ValueError("one list of responses per trial report")
    counted = [i for i, report in enumerate(reports) if counts_toward_rates(report.exit_reason)]
    ended = [reports[i] for i in counted]
    # an unjudged trial is no pass and no failure: the pass rate is over the trials something
    # judged; its verdicts (advisory ones) and responses still count for their own rates
    kept = [report for report in ended if report.status != "unjudged"]
    passed = sum(report.passed for report in kept)
    rate = pass_rate(passed, len(kept), statistics,
                     inconclusive=sum(report.status == "inconclusive" for report in kept))
    from ..metrics import TIMING_METRICS  # not at import: validate does not need the metrics

    responses: dict[str, list[float]] = {}
    # a degraded response's clock stamps may be late: a figure that may be off beyond the
    # tolerance judges no gate (judged per figure, ``degraded_figures``: that figure alone;
    # judged per stamp, ``timing_degraded``: all its timing figures); a trial judged whole (a
    # bundle without late ticks, ``timing_degraded`` unset) leaves all its responses out.
    # ``first_audio_latency_ms`` rests on one stamp, judged on its own.
    untrusted = {(i, index) for i in counted for index, metrics in enumerate(turns[i])
                 if (metrics.timing_degraded if metrics.timing_degraded is not None
                     else reports[i].measurement_degraded)}

    def untrusted_for(metric: str) -> set[tuple[int, int]]:
        return {(i, index) for i, index in untrusted
                if turns[i][index].degraded_figures is None
                or metric in (turns[i][index].degraded_figures or ())}

    first_untrusted = {(i, index) for i in counted for index, metrics in enumerate(turns[i])
                       if metrics.first_audio_degraded
                       or (metrics.first_audio_degraded is None and (i, index) in untrusted)}
    left_out: dict[str, set[tuple[int, int]]] = {}
    for gate in gates:
        if gate.metric != PASS_RATE and gate.metric not in responses:
            skipped = (first_untrusted if gate.metric == "first_audio_latency_ms" else
                       untrusted_for(gate.metric) if gate.metric in TIMING_METRICS else set())
            left_out[gate.metric] = skipped
            values = (metrics.figure(gate.metric) for i in counted
                      for index, metrics in enumerate(turns[i]) if (i, index) not in skipped)
            responses[gate.metric] = [v for v in values if v is not None and np.isfinite(v)]
    cut_ins = sum(bool(metrics.product_cut_in) for i in counted for metrics in turns[i])
    checks = judge_gates(gates, rate=rate, responses=responses, statistics=statistics,
                         cut_ins=cut_ins)
    checks = [check.model_copy(update={"message": f"{check.message} (the "
                                       f"{len(left_out[check.metric])} timing-degraded "
                                       f"response(s) of {len({i for i, _ in left_out[check.metric]})}"
                                       f" degraded trial(s) left out)"})
              if left_out.get(check.metric) else check for check in checks]
    rates, rows = selectivity([(reports[i].trial, probes[i]) for i in counted], statistics) \
        if probes is not None else ([], [])
    warnings = measurement_warnings(
        ended, [turns[i] for i in counted],
        {check.metric: len(left_out[check.metric]) for check in checks
         if left_out.get(check.metric)})
    return RunStatistics(
        selectivity=rates, probes=rows, measurement_warnings=warnings,
        pass_rate=rate, pass_curve=pass_curve(len(kept), passed) if curve else [],
        verdict_pass_rates=verdict_pass_rates(ended, statistics), gates=checks,
        judge_corrected_pass_rates=judge_corrected_rates(ended, calibrations, statistics))


__all__ = ["GATE_METRICS", "PASS_RATE", "RunStatistics", "check_gate_metrics",
           "counts_toward_rates", "gate_config_of", "judge_corrected_rates", "judge_gates",
           "pass_curve", "pass_rate", "read_calibration", "run_statistics", "settings_of",
           "verdict_pass_rates"]
