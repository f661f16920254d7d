"""The command line's grammar: every command, its options and their types (the numeric ones
bounded by :mod:`voicelab._limits`), parsed with usage errors as one line and exit code 2.

What each command does is in its own module (:data:`._main.COMMANDS`); :mod:`._main` turns
the library's errors into exit codes.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from .._exit_codes import EXIT_CONFIG
from .._limits import (
    MAX_ARRIVAL_RATE,
    MAX_CONCURRENCY,
    MAX_RAMP_SECONDS,
    MAX_RETRIES,
    MAX_TRIALS,
    MAX_TURN_GAP_MS,
    MAX_WORKERS,
)
from ._numbers import FRACTION, NON_NEGATIVE, SEED, RealNumber, WholeNumber
from ._output import PROG

#: The types of the numeric options (see :mod:`._numbers`).
TRIALS = WholeNumber(1, MAX_TRIALS)


CONCURRENCY = WholeNumber(1, MAX_CONCURRENCY)


WORKERS = WholeNumber(1, MAX_WORKERS)


RETRIES = WholeNumber(0, MAX_RETRIES)


RAMP = RealNumber(0.0, MAX_RAMP_SECONDS, low_inclusive=True)


ARRIVAL_RATE = RealNumber(0.0, MAX_ARRIVAL_RATE)


PORT = WholeNumber(0, 65535)


FAIL_FAST = WholeNumber(1, MAX_TRIALS)


TURN_GAP_MS = RealNumber(0.0, MAX_TURN_GAP_MS)


#: a pass-rate interval's width, and a pass rate's allowed drop: fractions of all trials
WIDTH = RealNumber(0.0, 1.0)


RATE_DROP = RealNumber(0.0, 1.0, low_inclusive=True)


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --trials: must be ..." reads as the library's own "--trials: must be ..."
        message = re.sub(r"^argument (-[-\w]+(?:/-[-\w]+)?): ", r"\1: ", message)
        self.exit(EXIT_CONFIG, f"{PROG}: error: CLI: {message}\n")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config value (YAML-typed); prefix scenario./persona./"
                             "data./script./environment. to target those files")


def _add_outcome_options(parser: argparse.ArgumentParser, *, what: str) -> None:
    """What run and sweep share: naming, CI output, judge calibration, resuming."""
    parser.add_argument("--label", default=None, help=f"a name for the {what} in frames and "
                        "reports (e.g. baseline, candidate)")
    parser.add_argument("--junit", type=Path, default=None, metavar="PATH",
                        help="also write JUnit XML (one test case per trial, by cell)")
    parser.add_argument("--calibration", dest="calibrations", type=Path, action="append",
                        default=[], metavar="FILE",
                        help="a judge's calibration result (the calibration notebook's "
                             "output_path JSON): adds its judge-corrected pass rate")
    parser.add_argument("--resume", default=None, metavar="DIR",
                        help=f"finish this {what} folder: run only its planned trials that are "
                             "not done (interrupted or missing)")
    parser.add_argument("--rerun-failed", action="store_true",
                        help="with --resume: run the trials that did not pass again too")
    parser.add_argument("--retry-inconclusive", type=RETRIES, default=1, metavar="N",
                        help="run a trial that ended inconclusive (nothing failed, a critical "
                             "verdict undecided) again up to N times, same seed, at lower "
                             "concurrency; still inconclusive counts as not passed (default 1)")
    parser.add_argument("--max-cost", type=NON_NEGATIVE, default=None, metavar="AMOUNT",
                        help=f"the most the {what} may spend, in its pricing: table's currency: "
                             "no trial starts once what was spent and what the trials in "
                             "flight are expected to cost would pass it (exit 4, report "
                             "stopped: budget; docs/cost.md)")


def _add_selection_options(parser: argparse.ArgumentParser) -> None:
    """Choosing and stopping as pytest does (-k, --maxfail), and a summary for machines."""
    parser.add_argument("--only", action="append", default=[], metavar="EXPRESSION",
                        help="run only the trials it matches, like pytest -k: words (a "
                             "substring of a scenario id, persona or environment name, cell "
                             "id or trial id such as trial-003) joined by and, or, not and "
                             "parentheses; given twice: either")
    parser.add_argument("--fail-fast", type=FAIL_FAST, default=None, metavar="N",
                        help="start no further trial once N trials did not pass (those "
                             "running finish), like pytest --maxfail; exit 3 (4 for an "
                             "execution failure)")
    parser.add_argument("--json", action="store_true",
                        help="print a machine-readable summary (JSON) on stdout, and every "
                             "human line on stderr (docs/artifacts.md, the --json summary)")


def _add_telemetry_options(parser: argparse.ArgumentParser) -> None:
    """Where a run is seen while and after it runs (docs/observability.md)."""
    parser.add_argument("--otlp", default=None, metavar="URL",
                        help="export each trial as an OpenTelemetry trace to this OTLP/HTTP "
                             "collector (e.g. http://localhost:4318; default: "
                             "OTEL_EXPORTER_OTLP_ENDPOINT when set; pip install "
                             "'voicelab[telemetry]')")
    parser.add_argument("--metrics-port", type=PORT, default=None, metavar="PORT",
                        help="serve live Prometheus metrics (voicelab_*) on this port while "
                             "the run goes (0: any free port)")
    parser.add_argument("--metrics-address", default="127.0.0.1", metavar="ADDRESS",
                        help="the address the metrics are served on (default 127.0.0.1; "
                             "0.0.0.0 for a scraper elsewhere)")
    parser.add_argument("--history", default=None, metavar="DIR|URL",
                        help="earlier run and sweep bundles (a folder or store URL holding "
                             "them): classify each scenario x persona x environment cell as "
                             "stable pass, flaky or stable fail, say what flipped since the "
                             "last run, and mark flaky cells in --junit")


def _add_executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="where trials run: worker processes of this machine (local), or a "
                             "dask.distributed cluster (dask; pip install 'voicelab[dask]')")
    parser.add_argument("--workers", type=WORKERS, default=None, metavar="N",
                        help="local: worker processes (default: one per core; 1 runs the "
                             "trials in this process); dask without --scheduler: processes "
                             "of the LocalCluster")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="with --executor dask: the scheduler of an existing cluster "
                             "(e.g. tcp://10.0.0.5:8786); default: start a LocalCluster")


def _add_load_options(parser: argparse.ArgumentParser) -> None:
    """The load profile (docs/load-profiles.md): a closed ramp or an open arrival rate."""
    profile = parser.add_mutually_exclusive_group()
    profile.add_argument("--ramp", dest="ramp_seconds", type=RAMP, default=None,
                         metavar="SECONDS",
                         help="closed model: start the first --concurrency trials evenly over "
                              "this period, then each as one ends; 0: all at once (default: 0 "
                              "up to 50 concurrent, above that 20 ms a trial)")
    profile.add_argument("--arrival-rate", type=ARRIVAL_RATE, default=None, metavar="N",
                         help="open model: N new trials a second however long trials take, at "
                              "most --max-concurrency at once; an arrival with no free slot "
                              "starts late (counted in the run report), never skipped")
    parser.add_argument("--max-concurrency", type=CONCURRENCY, default=None, metavar="M",
                        help="with --arrival-rate: trials running at once at most (default: "
                             "--concurrency)")


def _add_global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """--debug and --version, before or after the sub-command. A sub-command's copies default
    to SUPPRESS, so they never reset what was given before the sub-command."""
    parser.add_argument("--debug", action="store_true", default=default,
                        help="show tracebacks and debug logs")
    parser.add_argument("--version", action="store_true", default=default,
                        help="print the version and exit")


def _validate_arguments(validate: argparse.ArgumentParser) -> None:
    """The arguments of ``validate``: the run file and its overrides."""
    validate.add_argument("run_file", type=Path)
    _add_run_options(validate)


def _run_arguments(run: argparse.ArgumentParser) -> None:
    """The arguments of ``run``: the run file, trials, where the bundle goes, and how its
    trials run, are chosen, are seen and end."""
    run.add_argument("run_file", type=Path, nargs="?", default=None,
                     help="the run config (with --resume: default, the one the bundle names)")
    run.add_argument("--trials", type=TRIALS, default=None, help="number of trials (default: config)")
    run.add_argument("--artifacts-dir", default=None,
                     help="where the bundle goes: a folder or a store URL such as "
                          "s3://bucket/runs (default: the config's artifacts_dir)")
    run.add_argument("--concurrency", type=CONCURRENCY, default=None, help="trials running at once")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_load_options(run)
    _add_executor_options(run)
    _add_outcome_options(run, what="run")
    _add_selection_options(run)
    _add_telemetry_options(run)
    _add_run_options(run)


def _sweep_arguments(sweep: argparse.ArgumentParser) -> None:
    """The arguments of ``sweep``: the suite file and what ``run`` takes, per matrix."""
    sweep.add_argument("suite_file", type=Path, nargs="?", default=None,
                       help="the suite (with --resume: default, the one the sweep names)")
    sweep.add_argument("--trials", type=TRIALS, default=None, help="trials per cell")
    sweep.add_argument("--artifacts-dir", default=None,
                       help="a folder or a store URL (default: the suite's artifacts_dir)")
    sweep.add_argument("--concurrency", type=CONCURRENCY, default=None,
                       help="conversations in flight across the matrix")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_load_options(sweep)
    _add_executor_options(sweep)
    _add_outcome_options(sweep, what="sweep")
    _add_selection_options(sweep)
    _add_telemetry_options(sweep)
    _add_run_options(sweep)


def _plan_arguments(plan: argparse.ArgumentParser) -> None:
    """The arguments of ``plan``: the suite, a width to size trials for, an earlier run to price from."""
    plan.add_argument("suite_file", type=Path)
    plan.add_argument("--trials", type=TRIALS, default=None)
    plan.add_argument("--width", type=WIDTH, default=None,
                      help="also print the trials per cell for a pass-rate interval at most "
                           "this wide (e.g. 0.2: +-10 points)")
    plan.add_argument("--confidence", type=FRACTION, default=None,
                      help="with --width (default: the suite's statistics)")
    plan.add_argument("--interval", choices=("wilson", "clopper_pearson"), default=None,
                      help="with --width (default: the suite's statistics)")
    plan.add_argument("--from", dest="from_run", default=None, metavar="RUN",
                      help="estimate the cost from this earlier run's or sweep's measured "
                           "usage (its cells' trials, priced under the suite's table) instead "
                           "of from the configuration alone")
    _add_run_options(plan)


def _report_arguments(report: argparse.ArgumentParser) -> None:
    """The arguments of ``report``: the bundles to render and the HTML file."""
    report.add_argument("run_dir", nargs="+",
                        help="a run, a sweep or a folder of runs (a path or a store URL); "
                             "several are shown side by side")
    report.add_argument("--output", default="report.html",
                        help="the HTML file: a path or a store URL (default: report.html)")


def _rescore_arguments(rescore: argparse.ArgumentParser) -> None:
    """The arguments of ``rescore``: the bundle, where its copy goes, judges, changed values, a price table."""
    rescore.add_argument("run_dir", help="a trial folder, a run folder or a sweep (a path or "
                                         "a store URL)")
    rescore.add_argument("--output", default=None,
                         help="re-score a copy here (default: rewrite the derived files in place)")
    rescore.add_argument("--judges", type=Path, default=None, metavar="RUN_FILE",
                         help="run the judges of this run file again (credentials from the "
                              "environment); default: keep the recorded judge results")
    rescore.add_argument("--set", dest="overrides", action="append", default=[],
                         metavar="KEY=VALUE",
                         help="judge the evidence with a changed value: scenario.eval_spec.* "
                              "(thresholds), measurement.* (tolerances), transcription.*, "
                              "quality_evaluation.* (with --judges); recorded in the run "
                              "report as rescore_overrides")
    rescore.add_argument("--pricing", type=Path, default=None, metavar="FILE",
                         help="price the recorded usage under this table (a pricing: block) "
                              "and change nothing else: only the trial, run and sweep "
                              "reports' cost is rewritten")


def _replay_arguments(replay: argparse.ArgumentParser) -> None:
    """The arguments of ``replay``: the bundle to send again and where the new run goes."""
    replay.add_argument("run_dir", type=Path, help="the run (or sweep) folder to replay")
    replay.add_argument("--run-file", type=Path, default=None,
                        help="take the configuration from this run file (default: the one the "
                             "bundle recorded, resolved-*.json)")
    replay.add_argument("--artifacts-dir", type=Path, default=None,
                        help="where the new run goes (default: beside RUN_DIR)")
    replay.add_argument("--concurrency", type=CONCURRENCY, default=None, help="trials running at once")
    replay.add_argument("--label", default=None, help="a name for the replay in frames and "
                                                      "reports")
    replay.add_argument("--junit", type=Path, default=None, metavar="PATH",
                        help="also write JUnit XML (one test case per trial)")
    replay.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_load_options(replay)
    _add_run_options(replay)


def _ingest_arguments(ingest: argparse.ArgumentParser) -> None:
    """The arguments of ``ingest``: the recorded calls, their channels and turns, and how they are judged."""
    ingest.add_argument("calls", nargs="*", default=[],
                        help="stereo recordings (WAV, FLAC, OGG; CALL.transcript.json beside "
                             "one is its transcript) or manifests (.yaml/.json listing calls)")
    ingest.add_argument("--pair", dest="pairs", nargs=2, action="append", default=[],
                        metavar=("USER", "AGENT"),
                        help="a call recorded as two mono files: the caller's, the agent's")
    ingest.add_argument("--channels", default=None, metavar="user=N,agent=M",
                        help="which channel of the stereo files is the caller and which the "
                             "agent (default user=0,agent=1)")
    ingest.add_argument("--artifacts-dir", required=True,
                        help="where the bundle goes (a new run folder inside, and latest)")
    ingest.add_argument("--run-file", type=Path, default=None,
                        help="judge the calls by this run file's scenario (expected topics, "
                             "eval_spec), judges, transcription, gates and retention")
    ingest.add_argument("--turn-gap-ms", type=TURN_GAP_MS, default=3000.0, metavar="MS",
                        help="a caller silent this long (the agent too) ends the turn "
                             "(default 3000)")
    ingest.add_argument("--label", default=None, help="a name for the calls in frames and "
                                                      "reports")
    ingest.add_argument("--junit", type=Path, default=None, metavar="PATH",
                        help="also write JUnit XML (one test case per call)")
    _add_run_options(ingest)


def _compare_arguments(compare: argparse.ArgumentParser) -> None:
    """The arguments of ``compare``: the two bundles, the regression gates and the outputs."""
    compare.add_argument("baseline", help="the baseline run or sweep folder (or store URL)")
    compare.add_argument("candidate", help="the candidate run or sweep folder (or store URL)")
    compare.add_argument("--max-pass-rate-drop", type=RATE_DROP, default=None, metavar="RATE",
                         help="gate: the pass rate may drop by at most this (0.05: 5 points)")
    compare.add_argument("--max-latency-p95-increase-ms", type=NON_NEGATIVE, default=None,
                         metavar="MS", help="gate: the p95 of first_audio_latency_ms may rise "
                                            "by at most this")
    compare.add_argument("--max-response-latency-p95-increase-ms", type=NON_NEGATIVE, default=None,
                         metavar="MS", help="gate: the p95 of response_latency_ms (speech to "
                                            "speech) may rise by at most this")
    compare.add_argument("--max-increase", action="append", default=[],
                         metavar="METRIC:STATISTIC=VALUE",
                         help="gate on any per-response metric, e.g. dead_air_ms:p95=200")
    compare.add_argument("--no-default-gates", action="store_true",
                         help="judge only the gates given (default: also a pass-rate drop "
                              "beyond 5 points and p95 latency increases beyond 100 ms, "
                              "each judged on the whole interval)")
    compare.add_argument("--strict", action="store_true",
                         help="gates fail unless the interval shows no regression (needs more "
                              "trials; the output says how many)")
    compare.add_argument("--confidence", type=FRACTION, default=0.95)
    compare.add_argument("--seed", type=SEED, default=0, help="seeds the bootstrap")
    compare.add_argument("--output", type=Path, default=None, metavar="JSON",
                         help="write the comparison as JSON")
    compare.add_argument("--junit", type=Path, default=None, metavar="PATH",
                         help="write JUnit XML: both runs' trials and the gates")
    compare.add_argument("--html", type=Path, default=None, metavar="PATH",
                         help="write an HTML compare report (executes notebooks/compare.ipynb)")
    compare.add_argument("--history", default=None, metavar="DIR|URL",
                         help="earlier run and sweep bundles: also classify each candidate "
                              "cell as stable pass, flaky or stable fail over them")


def _check_arguments(check: argparse.ArgumentParser) -> None:
    """The arguments of ``check``: the endpoint to call and where its bundle goes."""
    check.add_argument("config", type=Path, help="a run file, or a YAML file with just its "
                                                 "endpoint block")
    check.add_argument("--artifacts-dir", default=None,
                       help="keep the call's bundle here (default: a temporary folder)")
    check.add_argument("--json", action="store_true", help="the points as JSON on stdout")
    _add_run_options(check)


def _init_arguments(init: argparse.ArgumentParser) -> None:
    """The arguments of ``init``: the folder, and an agent of its own to write."""
    init.add_argument("directory", type=Path)
    init.add_argument("--force", action="store_true", help="overwrite existing files")
    init.add_argument("--agent", choices=("websocket", "twilio", "pipecat"), default=None,
                      metavar="WIRE",
                      help="also write agent.py, a tiny agent of your own speaking this wire "
                           "(websocket, twilio or pipecat; it answers with the caller's audio "
                           "played back), and make run.yaml start it for every trial")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=PROG, description="Test deployed voice agents by simulation.")
    _add_global_options(parser, default=False)
    commands = parser.add_subparsers(dest="command", parser_class=_ArgumentParser)
    for name, add_arguments, text in (
            ("validate", _validate_arguments,
             "check a run without opening connections"),
            ("run", _run_arguments,
             "run seeded trials of a scenario and write a bundle"),
            ("sweep", _sweep_arguments,
             "run a scenario x persona x environment x trial matrix from a suite file"),
            ("plan", _plan_arguments,
             "print a suite's matrix size, conversations, estimated audio minutes and cost; runs "
             "nothing"),
            ("report", _report_arguments,
             "render run directories as a self-contained HTML report (executes "
             "notebooks/report.ipynb)"),
            ("rescore", _rescore_arguments,
             "recompute placement, metrics and verdicts of a bundle from what it recorded"),
            ("replay", _replay_arguments,
             "send a run's (or a sweep's) recorded user audio again, trial by trial (same seeds), "
             "to a product, possibly a new build; writes a new run beside it"),
            ("ingest", _ingest_arguments,
             "turn recorded real calls (stereo: caller and agent on their own channels, or two "
             "mono files) into a bundle with a run's metrics, transcripts and verdicts"),
            ("compare", _compare_arguments,
             "compare a candidate run (or sweep) with a baseline, trial by trial; exit 3 when a "
             "regression gate blocks"),
            ("check", _check_arguments,
             "one short call to a product's endpoint: say point by point what it does (answers, "
             "ends its turn, transcripts, barge-in, closes cleanly) against what its adapter "
             "expects, with the fix for each failure"),
            ("init", _init_arguments,
             "copy starter suite files into DIR"),
    ):
        add_arguments(commands.add_parser(name, help=text))
    for command in commands.choices.values():
        _add_global_options(command, default=argparse.SUPPRESS)
    return parser
