"""`voice-evaluator ingest CALLS... --artifacts-dir DIR [--run-file RUN.yaml]`.

One line per call (its turns, barge-ins, response latency and verdicts), the run's pass line
and the bundle path. Exit codes are a run's: 0 every call passed what the run file judges, 3 a
verdict failed or a gate blocks, 4 a call could not be scored, 2 a call that cannot be read.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from ..artifacts import check_output_target
from ..config import mask_known
from ..errors import ConfigError
from ..metrics import summarize
from ..runner import RunInterrupted
from ._output import relative
from ._run import SIGNAL_EXIT, _write_junit, run_until_signal
from ._summaries import fmt_ms, print_statistics, trial_line, unjudged_note

if TYPE_CHECKING:
    from ..ingest import ChannelMap, IngestOutcome

_CHANNEL_MAP = re.compile(r"^\s*user\s*=\s*(\d+)\s*,\s*agent\s*=\s*(\d+)\s*$")


def _channels(text: str | None) -> ChannelMap:
    from ..ingest import ChannelMap

    if text is None:
        return ChannelMap()
    match = _CHANNEL_MAP.match(text)
    if not match:
        raise ConfigError(f"expected user=N,agent=M, got {text!r}", source="CLI",
                          key="--channels")
    try:
        return ChannelMap(user=int(match[1]), agent=int(match[2]))
    except ValueError as error:
        raise ConfigError(" ".join(str(error).split("\n")[-1:]), source="CLI",
                          key="--channels") from None


def ingest_command(args: argparse.Namespace) -> int:
    from ..ingest import IngestOptions, IngestOutcome, aingest, call_sources, mono_pair

    if args.junit is not None:
        check_output_target(args.junit, key="--junit")
    if not args.calls and not args.pairs:
        raise ConfigError("give the calls to ingest: stereo files, manifests or --pair USER "
                          "AGENT", source="CLI")
    channels = _channels(args.channels)
    calls = call_sources(args.calls, channels=channels) if args.calls else []
    calls += [mono_pair(user, agent) for user, agent in args.pairs]
    options = IngestOptions(turn_gap_ms=args.turn_gap_ms, label=args.label)
    outcome, number, stopped = run_until_signal(lambda: aingest(
        calls, artifacts_dir=args.artifacts_dir, run_file=args.run_file,
        overrides=args.overrides, options=options))
    if number is not None:  # SIGINT or SIGTERM: what was ingested, said and kept
        if isinstance(stopped, RunInterrupted) and isinstance(stopped.outcome, IngestOutcome):
            _summary(stopped.outcome)
            _write_junit(args, str(stopped.outcome.bundle_path))
        return SIGNAL_EXIT[number]
    assert outcome is not None
    code = _summary(outcome)
    _write_junit(args, str(outcome.bundle_path))
    return code


def _summary(outcome: IngestOutcome) -> int:
    report = outcome.report
    for call, trial in zip(outcome.calls, outcome.trials, strict=False):
        turns = trial.turn_metrics
        latency = summarize([t.response_latency_ms for t in turns])
        barge_ins = sum(t.interrupted for t in turns)
        print(f"{mask_known(call.call_id)}: {trial.report.user_turns} caller turn(s), "
              f"{trial.report.product_responses} response(s), {barge_ins} barge-in(s), "
              f"response latency p50 {fmt_ms(latency.p50)}; "
              + trial_line(trial.summary, trial.report))
    print(f"{report.passed_trials}/{report.trial_count} call(s) passed{unjudged_note(report)}")
    print_statistics(report)
    for problem in outcome.write_errors:
        print(f"execution failed: {problem}")
    print(f"bundle: {relative(str(outcome.bundle_path))}")
    return outcome.exit_code
