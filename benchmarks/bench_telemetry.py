"""What telemetry costs: on the run's event loop, and on its own threads, per trial.

Runs the workload-neutral example (the fake product, unpaced) with traces exported to a local
OTLP/HTTP receiver and live metrics served, and measures:

* per trial, on the loop: the observers' ``trial_finished`` (the trace export only hands the
  trial's folder to its thread; the metrics count) and ``trial_started``;
* per trial, on the exporter's thread: reading the trial's timeline from its folder, planning
  its spans and creating them (the SDK's batch processor serializes and sends them later);
* the loop lag of the trials with and without telemetry (voice-metrics.json p99, as a check
  that nothing landed on the loop).

Run from the repository root (needs ``pip install 'voicelab[telemetry]'``):

    python benchmarks/bench_telemetry.py [--trials 40] [--paced]

Printed, not asserted: this is not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import voicelab
from voicelab.artifacts import trial_folder
from voicelab.telemetry import Telemetry, read_timeline, trial_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "run-workload-neutral-voice.yaml"


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _Timed:
    """An observer's calls, timed where the run makes them (the loop)."""

    def __init__(self, inner: Any, times: dict[str, list[float]]):
        self.inner, self.times = inner, times

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in ("trial_started", "trial_finished"):
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return method(*args, **kwargs)
            finally:
                key = f"{type(self.inner).__name__}.{name}"
                self.times.setdefault(key, []).append((time.perf_counter_ns() - start) / 1e3)

        return timed


def _lag_p99(outcome: Any) -> list[float]:
    return [r.loop_lag.p99 for r in outcome.trials if r.loop_lag and r.loop_lag.p99 is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--paced", action="store_true", help="real-time audio (slower)")
    args = parser.parse_args()
    overrides = [f"pace_audio={'true' if args.paced else 'false'}"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    times: dict[str, list[float]] = {}
    with TemporaryDirectory() as scratch:
        loaded = voicelab.load_run(EXAMPLE, overrides=overrides)
        plain = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
            trials=args.trials,
            concurrency=4,
            artifacts_dir=Path(scratch) / "plain")))
        with Telemetry(otlp=f"http://127.0.0.1:{server.server_port}", metrics_port=0) as tel:
            observed = asyncio.run(voicelab.arun(voicelab.load_run(EXAMPLE, overrides=overrides), voicelab.RunOptions(
                trials=args.trials,
                concurrency=4,
                artifacts_dir=Path(scratch) / "observed",
                observers=[_Timed(o, times) for o in tel.observers])))
        export: list[float] = []
        for result in observed.trials:  # the exporter thread's work, measured on its own
            start = time.perf_counter_ns()
            trace = trial_trace(result.report, result.turn_metrics,
                                read_timeline(observed.bundle_path / trial_folder(
                                    result.report.trial)))
            export.append((time.perf_counter_ns() - start) / 1e3)
        spans = len(trace.spans)
    print(f"{args.trials} trials, {'paced' if args.paced else 'unpaced'}; telemetry: "
          f"{observed.report.telemetry}")
    for key, values in sorted(times.items()):
        print(f"on the loop, {key}: median {statistics.median(values):.1f} us, "
              f"max {max(values):.1f} us")
    print(f"exporter thread, timeline + span plan per trial ({spans} spans): median "
          f"{statistics.median(export):.0f} us, max {max(export):.0f} us")
    for name, outcome in (("without telemetry", plain), ("with telemetry", observed)):
        lags = _lag_p99(outcome)
        print(f"loop lag p99 per trial {name}: median {statistics.median(lags):.2f} ms, "
              f"max {max(lags):.2f} ms")
    server.shutdown()


if __name__ == "__main__":
    main()
