"""`voice-evaluator compare BASELINE CANDIDATE`: paired comparison and regression gates.

Exit 3 when a gate blocks (evidence of a regression, or with ``--strict`` no evidence of its
absence), 0 otherwise, 2 for bad input and for nothing to compare. Without gate options the
default gates are judged (:data:`voicelab.analysis.DEFAULT_GATES`); a gate option replaces the
default of the same name, ``--no-default-gates`` leaves only the gates given. The analysis package (pandas, scipy) is imported here,
inside the command, never on the CLI's start-up path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from dataclasses import asdict
from pathlib import Path

from .._atomic import atomic_write
from .._exit_codes import EXIT_OK, EXIT_QUALITY
from .._extras import REPORT_MODULES, require_modules
from ..artifacts import (
    MATRIX_REPORT,
    RUN_REPORT,
    TRANSCRIPT_JSON,
    TRIAL_REPORT,
    VOICE_EVENTS,
    VOICE_METRICS,
    check_output_target,
    local_folder,
)
from ..errors import ConfigError
from ._numbers import NON_NEGATIVE
from ._output import relative

_INCREASE = re.compile(r"^(?P<metric>[A-Za-z0-9_]+):(?P<statistic>[A-Za-z0-9]+)=(?P<value>.+)$")


#: What compare, its JUnit XML and its report read of a run in a store (not the audio).
_COMPARED_FILES = frozenset({RUN_REPORT, MATRIX_REPORT, TRIAL_REPORT,
                             VOICE_METRICS, VOICE_EVENTS, TRANSCRIPT_JSON})


def _folder(path: Path, *, key: str, given: str) -> Path:
    if not path.is_dir():
        raise ConfigError(f"{key}: no such run or sweep folder", source=given)
    if not (path / RUN_REPORT).is_file() and not (path / MATRIX_REPORT).is_file():
        raise ConfigError(f"{key}: not a run or sweep folder (no run-report.json or "
                          "matrix-report.json)", source=given)
    return path


def _gates(args: argparse.Namespace) -> tuple[list, list[str]]:  # Gates: imported lazily
    """The gates to judge: the defaults (unless --no-default-gates), each replaced by a given
    gate of its name, then the other given gates; and the names of the defaults kept."""
    from ..analysis import DEFAULT_GATES, Gate

    gates = []
    try:
        if args.max_pass_rate_drop is not None:
            gates.append(Gate.pass_rate_drop(args.max_pass_rate_drop, strict=args.strict))
        for metric, value in (("first_audio_latency_ms", args.max_latency_p95_increase_ms),
                              ("response_latency_ms", args.max_response_latency_p95_increase_ms)):
            if value is not None:
                gates.append(Gate.metric_increase(metric, value, statistic="p95",
                                                  strict=args.strict))
        for text in args.max_increase:
            match = _INCREASE.match(text.strip())
            if match is None:
                raise ValueError(f"--max-increase {text!r}: expected METRIC:STATISTIC=VALUE, "
                                 "e.g. dead_air_ms:p95=200")
            try:
                allowed = NON_NEGATIVE(match["value"])
            except argparse.ArgumentTypeError as error:
                raise ValueError(f"--max-increase {text!r}: the allowed increase {error}") \
                    from None
            gates.append(Gate.metric_increase(match["metric"], allowed,
                                              statistic=match["statistic"], strict=args.strict))
    except ValueError as error:
        raise ConfigError(str(error), source="CLI") from None
    defaults = () if args.no_default_gates else DEFAULT_GATES
    given = {gate.name: gate for gate in gates}
    kept = [gate.name for gate in defaults if gate.name not in given]
    chosen = [given.pop(gate.name) if gate.name in given
              else Gate(gate.metric, gate.allowed_change, gate.statistic, args.strict)
              for gate in defaults]
    return [*chosen, *given.values()], kept


def _gates_line(args: argparse.Namespace, gates: list, kept: list[str]) -> str:
    """Which gates are judged: a CI log shows that a comparison judged something, and what."""
    if not gates:
        return "gates: none (--no-default-gates without gate options): nothing can block"
    hint = "" if args.no_default_gates else \
        "; a gate option replaces its default, --no-default-gates drops the defaults"
    defaults = f"defaults: {', '.join(kept)}" if kept else "no defaults"
    return f"gates: {', '.join(g.name for g in gates)} ({defaults}{hint})"


def _cell_lines(args: argparse.Namespace, baseline: Path, candidate: Path) -> list[str]:
    """The cells that flipped from the baseline to the candidate (every trial passed, or not),
    and with --history every candidate cell's stability over the earlier runs too."""
    from ..history import classify, read_history, stability_line

    earlier, _ = read_history(baseline)
    if args.history is not None:
        more, _ = read_history(args.history)
        earlier += more
    now, _ = read_history(candidate)
    cells = classify(earlier, now, confidence=args.confidence)
    if args.history is None:
        cells = [cell for cell in cells if cell.flipped]
    return [f"cell {stability_line(cell)}" for cell in cells]


def compare_command(args: argparse.Namespace) -> int:
    if not 0.0 < args.confidence < 1.0:
        raise ConfigError(f"must be between 0 and 1, got {args.confidence}", source="CLI",
                          key="--confidence")
    gates, kept = _gates(args)
    for target, key in ((args.output, "--output"), (args.junit, "--junit"),
                        (args.html, "--html")):
        if target is not None:  # refused before comparing: never a device, a link or a folder
            check_output_target(target, key=key)
    if args.html is not None:
        # a missing extra: exit 2 and the pip line before comparing, not after
        require_modules(REPORT_MODULES, purpose="compare --html")
    with contextlib.ExitStack() as copies:  # a run in a store is compared from a local copy
        baseline, candidate = (
            _folder(copies.enter_context(local_folder(given, names=_COMPARED_FILES,
                                                      source="CLI", key=key)),
                    key=key, given=given)
            for given, key in ((args.baseline, "BASELINE"), (args.candidate, "CANDIDATE")))
        return _compare(args, baseline, candidate, gates, kept)


def _compare(args: argparse.Namespace, baseline: Path, candidate: Path, gates: list,
             kept: list[str]) -> int:
    from ..analysis import compare

    comparison = compare(baseline, candidate, confidence=args.confidence, seed=args.seed,
                         gates=gates)
    print(_gates_line(args, gates, kept))
    for line in comparison.lines():
        print(relative(line))
    for line in _cell_lines(args, baseline, candidate):
        print(line)
    if args.output is not None:
        text = json.dumps(comparison.to_dict(), indent=2, allow_nan=False) + "\n"
        atomic_write(Path(args.output), text.encode("utf-8"))
        print(f"comparison: {relative(str(Path(args.output).resolve()))}")
    if args.junit is not None:
        from ..artifacts import junit_xml

        junit_xml([baseline, candidate], gates=comparison.gates, path=args.junit,
                  labels=("baseline", "candidate"))
        print(f"junit: {relative(str(Path(args.junit).resolve()))}")
    if args.html is not None:
        from ..analysis import write_compare_report

        output = write_compare_report(baseline, candidate, output_path=args.html,
                                      parameters={"confidence": args.confidence,
                                                  "seed": args.seed,
                                                  "gates": [asdict(g) for g in gates],
                                                  "default_gates": False})  # chosen above
        print(f"report: {relative(str(output))}")
    return EXIT_OK if comparison.passed else EXIT_QUALITY
