"""Live Prometheus metrics of the runs in progress (a :class:`RunObserver`, ``--metrics-port``).

Counted in the run's own process where a trial is handed to the executor and where it settles
(trials may run in worker processes; their results come back here), never on a conversation's
receive path: an increment under the client's lock per trial and one histogram observation per
response. The metrics live in a registry of their own (not the process-wide default one: a
notebook's process is the user's), served by prometheus-client's HTTP server thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .._extras import require_modules
from ..artifacts import TelemetryExport
from ..execution import ObservedRun
from ..runner import TrialResult

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

logger = logging.getLogger(__name__)

METRICS_MODULES = ("prometheus_client",)
#: Every metric's name starts with this.
PREFIX = "voicelab_"
#: The labels naming a cell of a sweep (a run is one cell).
CELL_LABELS = ("scenario", "persona", "environment")
#: Response latency and dead air, in seconds: from a fast product's tens of milliseconds to a
#: stalled one's seconds.
LATENCY_BUCKETS_SECONDS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
DEAD_AIR_BUCKETS_SECONDS = (0.0, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)


class LiveMetrics:
    """Serves ``voicelab_*`` metrics on ``http://address:port/metrics`` while it is open.

    ``port`` 0 picks a free port (:attr:`port` says which). Close it (or use it as a context
    manager) to stop the server.
    """

    def __init__(self, port: int, *, address: str = "127.0.0.1"):
        require_modules(METRICS_MODULES, purpose="live metrics (--metrics-port)")
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        from prometheus_client.exposition import start_http_server

        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.started = Counter(f"{PREFIX}trials_started", "Trials (and retries of inconclusive "
                               "trials) handed to the executor", CELL_LABELS, registry=registry)
        self.finished = Counter(f"{PREFIX}trials_finished", "Trials settled, by status "
                                "(passed, failed, inconclusive) and execution status",
                                (*CELL_LABELS, "status", "execution_status"), registry=registry)
        self.degraded = Counter(f"{PREFIX}trials_timing_degraded", "Settled trials whose "
                                "timings the evaluator's own loop lag degraded (flagged)",
                                CELL_LABELS, registry=registry)
        self.degraded_fraction = Gauge(f"{PREFIX}timing_degraded_fraction", "Flagged (timing "
                                       "degraded) trials over settled trials", CELL_LABELS,
                                       registry=registry)
        self.in_progress = Gauge(f"{PREFIX}trials_in_progress", "Trials in flight now (the "
                                 "current concurrency)", CELL_LABELS, registry=registry)
        self.latency = Histogram(f"{PREFIX}response_latency_seconds", "End of the user's speech "
                                 "to the onset of the product's speech, per response",
                                 CELL_LABELS, buckets=LATENCY_BUCKETS_SECONDS, registry=registry)
        self.dead_air = Histogram(f"{PREFIX}dead_air_seconds", "Silences of 300 ms or more "
                                  "inside a reply, per response", CELL_LABELS,
                                  buckets=DEAD_AIR_BUCKETS_SECONDS, registry=registry)
        self._settled: dict[tuple[str, ...], tuple[int, int]] = {}
        #: each cell's labelled series, looked up once (a label lookup costs the loop ~10 us)
        self._series: dict[tuple[str, ...], dict[str, Any]] = {}
        self._server: WSGIServer
        self._server, self._thread = start_http_server(port, addr=address, registry=registry)
        self.address = address
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/metrics"

    @staticmethod
    def _cell(run: ObservedRun) -> tuple[str, str, str]:
        return run.scenario, run.persona, run.environment

    def _of(self, run: ObservedRun) -> dict[str, Any]:
        cell = self._cell(run)
        series = self._series.get(cell)
        if series is None:  # every series of the cell exists from the start (zeros, not none)
            series = self._series[cell] = {
                "started": self.started.labels(*cell),
                "in_progress": self.in_progress.labels(*cell),
                "degraded": self.degraded.labels(*cell),
                "degraded_fraction": self.degraded_fraction.labels(*cell),
                "latency": self.latency.labels(*cell), "dead_air": self.dead_air.labels(*cell)}
        return series

    def run_started(self, run: ObservedRun) -> None:
        self._of(run)

    def trial_started(self, run: ObservedRun, trial: int) -> None:
        series = self._of(run)
        series["started"].inc()
        series["in_progress"].inc()

    def trial_finished(self, run: ObservedRun, result: TrialResult) -> None:
        cell = self._cell(run)
        series = self._of(run)
        report = result.report
        series["in_progress"].dec()
        self.finished.labels(*cell, report.status or ("passed" if report.passed else "failed"),
                             report.execution_status).inc()
        settled, flagged = self._settled.get(cell, (0, 0))
        settled, flagged = settled + 1, flagged + int(report.measurement_degraded)
        self._settled[cell] = (settled, flagged)
        if report.measurement_degraded:
            series["degraded"].inc()
        series["degraded_fraction"].set(flagged / settled)
        for turn in result.turn_metrics:
            if turn.response_latency_ms is not None:
                series["latency"].observe(turn.response_latency_ms / 1000)
            if turn.dead_air_ms is not None:
                series["dead_air"].observe(turn.dead_air_ms / 1000)

    def run_ending(self, run: ObservedRun, *, status: str) -> TelemetryExport | None:
        return None

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LiveMetrics:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
