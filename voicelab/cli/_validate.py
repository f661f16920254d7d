"""`voice-evaluator validate RUN` and `plan SUITE`: check and describe, run nothing."""

from __future__ import annotations

import argparse
from typing import Any, cast

from .._exit_codes import EXIT_OK
from ..errors import ConfigError
from ._output import relative


def validate_command(args: argparse.Namespace) -> int:
    from .._validate import validate_run
    from ..config import load_run

    loaded = load_run(args.run_file, overrides=args.overrides)
    summary = validate_run(loaded).summary
    print(f"{relative(str(args.run_file))}: valid")
    for line in summary.lines():
        print("  " + relative(line))
    return EXIT_OK


def plan_command(args: argparse.Namespace) -> int:
    from ..runner import matrix_costs, plan_matrix, read_measured_costs

    if args.width is None and (args.confidence is not None or args.interval is not None):
        raise ConfigError("--confidence and --interval go with --width", source="CLI")
    plan = plan_matrix(args.suite_file, trials=args.trials, overrides=args.overrides)
    measured = read_measured_costs(args.from_run) if args.from_run is not None else None
    costs = matrix_costs(plan, measured=measured)
    lines = plan.lines()
    if args.width is not None:
        lines += _width_lines(plan, width=args.width, confidence=args.confidence,
                              interval=args.interval)
    lines += _cost_lines(plan, costs, from_run=args.from_run)
    for line in lines:
        print(relative(line))
    for cell, cost in zip(plan.cells, costs, strict=True):
        print(f"  cell {cell.cell_id}: {plan.trials_of(cell)} trial(s), cost "
              f"{cost.estimate.text()}"
              + (" (measured)" if cost.estimate.source == "measured" else ""))
    return EXIT_OK


def _cost_lines(plan: Any, costs: list[Any], *, from_run: str | None) -> list[str]:
    """The expected cost of the whole suite, and of each stage (cheap ones first)."""
    from ..runner import combined

    measured = sum(c.estimate.source == "measured" for c in costs)
    source = ("the configuration (docs/cost.md, \"Estimates\")" if not measured else
              f"{from_run}'s measured usage for {measured} of {len(costs)} cell(s), the "
              f"configuration for the others")
    lines = [f"cost         {combined([c.estimate for c in costs]).text()} "
             f"from {source}"]
    for stage in plan.stages:
        estimate = combined([c.estimate for c in costs if c.stage == stage.name])
        lines.append(f"  stage {stage.name}: {estimate.text()}")
    budget = plan.suite.suite.budget
    if budget is not None:
        lines.append(f"budget       {budget.max_cost:g} (the suite's budget:; --max-cost "
                     "replaces it)")
    return lines


def _width_lines(plan: Any, *, width: float, confidence: float | None,
                 interval: str | None) -> list[str]:
    """How many trials a cell needs for its pass-rate interval to be at most ``width`` wide,
    at the worst case (an observed rate of one half) and near the top (0.9), and how wide the
    interval is at the planned trials per cell."""
    from ..scoring import IntervalMethod, proportion_interval, trials_for_width

    confidence = plan.statistics.confidence if confidence is None else confidence
    method: IntervalMethod = plan.statistics.interval if interval is None else \
        cast(IntervalMethod, interval)
    try:
        needed = {p: trials_for_width(width, confidence=confidence, p=p, method=method)
                  for p in (0.5, 0.9)}
    except ValueError as error:
        raise ConfigError(str(error), source="CLI", key="--width/--confidence") from None
    label = "Wilson" if method == "wilson" else "Clopper-Pearson"
    widest = max(
        (lambda r: (r.high or 0.0) - (r.low or 0.0))(
            proportion_interval(passed, plan.trials, confidence=confidence, method=method))
        for passed in range(plan.trials + 1))
    return [
        f"interval     {confidence:.0%} {label}, at most {width:.3g} wide "
        f"(+-{width / 2:.1%}): {needed[0.5]} trial(s) per cell at any observed rate "
        f"(worst case 50%), {needed[0.9]} if the rate is near 90%",
        f"             at {plan.trials} trial(s) per cell an interval is up to {widest:.3g} "
        f"wide; the worst case needs {needed[0.5] * len(plan.cells)} conversation(s) for the "
        f"{len(plan.cells)} cell(s)",
    ]
