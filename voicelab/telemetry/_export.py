"""OpenTelemetry traces of a run's trials, exported over OTLP/HTTP (a :class:`RunObserver`).

Each settled trial's folder is handed to one thread of this exporter, which reads its timeline
(:mod:`._timeline`), plans its spans (:mod:`._spans`) and creates them with the OpenTelemetry
SDK under the trial's own trace id and root span id (a preset :class:`IdGenerator`: the ids the
product was sent in ``traceparent``); the SDK's batch processor exports them from its thread.
The run's event loop only submits a path to the thread. A collector that is down or refuses
costs the export, never the run: failures are counted (:func:`counting_exporter`), warned
about once, and reported in run-report.json ``telemetry``; the final flush is bounded.

The standard ``OTEL_*`` variables configure the SDK: ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` (the resource), ``OTEL_EXPORTER_OTLP_HEADERS`` /
``..._TIMEOUT`` / ``..._COMPRESSION`` / certificates (the exporter), ``OTEL_TRACES_SAMPLER``
and its argument (sampling, decided on the trial's trace id), ``OTEL_BSP_*`` (batching).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._extras import require_modules
from ..artifacts import TelemetryExport, trial_folder
from ..execution import ObservedRun
from ..runner import TrialResult
from ._spans import RUN_ID, RUN_SPAN, TrialTrace, trial_trace
from ._timeline import read_timeline

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span

logger = logging.getLogger(__name__)

#: The modules the export needs (``pip install 'voicelab[telemetry]'``).
TRACE_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
#: The longest a run's end waits for its spans to reach the collector; what is still queued
#: then is counted as failed (a collector that is down must not hold a CI job).
FINAL_FLUSH_SECONDS = 5.0
#: The instrumentation scope the spans are created under.
SCOPE = "voicelab"


@dataclass
class _RunCounts:
    """One run's spans: handed to the SDK, taken by the collector, and the run's own span."""

    traces: int = 0
    spans: int = 0
    #: trials that settled not passed (the run span's test.suite.run.status)
    not_passed: int = 0
    exported: int = 0
    run_span: Span | None = None
    pending: list[concurrent.futures.Future[None]] = field(default_factory=list)


class TraceExport:
    """Exports every trial of the runs it observes to ``endpoint`` (an OTLP/HTTP traces URL).

    Use it as a context manager (or call :meth:`close`): closing shuts the SDK down, bounded.
    One instance may observe several runs (a sweep's cells): each run's counts are its own.
    """

    def __init__(self, endpoint: str, *, shown: str | None = None,
                 headers: dict[str, str] | None = None):
        require_modules(TRACE_MODULES, purpose="exporting traces (--otlp)")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from ._ids import PresetIds

        #: the endpoint as reports and messages show it (no credentials)
        self.endpoint = shown or endpoint
        self._ids = PresetIds()
        self._counter = counting_exporter(OTLPSpanExporter(endpoint=endpoint, headers=headers),
                                          self._exported)
        # the resource and the sampler come from the OTEL_* variables (service.name defaults
        # to "voicelab" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names one)
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SCOPE}))
        self._provider: TracerProvider = TracerProvider(resource=resource,
                                                        id_generator=self._ids)
        self._provider.add_span_processor(BatchSpanProcessor(self._counter))
        self._tracer = self._provider.get_tracer(SCOPE)
        # one thread plans and creates the spans: the ids preset for a trial's root are taken
        # by the next span started, so span creation is never concurrent
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="voicelab-otel")
        self._lock = threading.Lock()
        self._runs: dict[str, _RunCounts] = {}
        self.warning: str | None = None
        self._closed = False

    # --- counting (the exporter's thread) -----------------------------------------------------

    def _exported(self, spans: Sequence[ReadableSpan], success: bool) -> None:
        with self._lock:
            if success:
                for span in spans:
                    run = self._runs.get(str((span.attributes or {}).get(RUN_ID, "")))
                    if run is not None:
                        run.exported += 1
                return
            first = self.warning is None
            if first:
                self.warning = (f"the OpenTelemetry collector at {self.endpoint} did not take "
                                f"{len(spans)} span(s) (down, refusing or too slow); the run "
                                f"goes on, and run-report.json telemetry counts what was lost")
        if first:
            logger.warning("%s", self.warning)

    # --- the observer ---------------------------------------------------------------------------

    def run_started(self, run: ObservedRun) -> None:
        with self._lock:
            counts = self._runs.setdefault(run.run_id, _RunCounts())
        counts.pending.append(self._thread.submit(self._start_run, run, counts, time.time_ns()))

    def trial_started(self, run: ObservedRun, trial: int) -> None:
        pass

    def trial_finished(self, run: ObservedRun, result: TrialResult) -> None:
        with self._lock:
            counts = self._runs.setdefault(run.run_id, _RunCounts())
        # the loop only hands the trial over: reading, planning and creating happen there
        counts.pending.append(self._thread.submit(self._export_trial, run, result, counts))

    def run_ending(self, run: ObservedRun, *, status: str) -> TelemetryExport | None:
        counts = self._runs.get(run.run_id)
        if counts is None:
            return None
        self._thread.submit(self._end_run, counts, status, time.time_ns()).result()
        for future in counts.pending:
            try:
                future.result()
            except Exception:  # noqa: BLE001 - a trial's spans lost, not the run
                logger.warning("a trial's spans could not be built", exc_info=True)
        # the SDK's flush exports in the calling thread with the exporter's retries and does
        # not keep to its timeout: it gets a thread of its own, and the run waits for it only
        # so long (what it has not sent by then counts as failed; closing stops its retries)
        flush = threading.Thread(target=self._provider.force_flush, name="voicelab-otel-flush",
                                 daemon=True)
        flush.start()
        flush.join(FINAL_FLUSH_SECONDS)
        with self._lock:
            spans, exported = counts.spans, counts.exported
        return TelemetryExport(endpoint=self.endpoint, traces=counts.traces, spans=spans,
                               spans_exported=exported, spans_failed=max(0, spans - exported),
                               warning=self.warning if exported < spans else None)

    def close(self) -> None:
        """Shut the SDK down (its last export bounded by the exporter's own timeout)."""
        if self._closed:
            return
        self._closed = True
        self._thread.shutdown(wait=True)
        self._counter.shutdown()
        self._provider.shutdown()

    def __enter__(self) -> TraceExport:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- span creation (this exporter's thread) -----------------------------------------------

    def _start_run(self, run: ObservedRun, counts: _RunCounts, started_ns: int) -> None:
        attributes: dict[str, str | int] = {"test.suite.name": run.scenario, RUN_ID: run.run_id,
            "voicelab.scenario": run.scenario, "voicelab.persona": run.persona,
            "voicelab.environment": run.environment, "voicelab.adapter": run.adapter,
            "voicelab.planned_trials": run.planned}
        if run.label:
            attributes["voicelab.label"] = run.label
        counts.run_span = self._tracer.start_span(RUN_SPAN, attributes=attributes,
                                                  start_time=started_ns)
        if counts.run_span.is_recording():
            with self._lock:
                counts.spans += 1

    def _end_run(self, counts: _RunCounts, status: str, ended_ns: int) -> None:
        if counts.run_span is None:
            return
        outcome = "aborted" if status == "interrupted" else \
            "failure" if counts.not_passed else "success"
        counts.run_span.set_attribute("test.suite.run.status", outcome)
        counts.run_span.end(end_time=ended_ns)

    def _export_trial(self, run: ObservedRun, result: TrialResult, counts: _RunCounts) -> None:
        timeline = read_timeline(run.bundle / trial_folder(result.report.trial))
        trace = trial_trace(result.report, result.turn_metrics, timeline, run_id=run.run_id)
        created = self.create(trace, link=counts.run_span)
        with self._lock:
            counts.traces += 1
            counts.spans += created
            counts.not_passed += result.report.status != "passed"

    def create(self, trace: TrialTrace, *, link: Span | None = None) -> int:
        """Create (and end) the planned spans; how many. Only on this exporter's thread."""
        from opentelemetry import trace as otel
        from opentelemetry.trace import Link, Status, StatusCode

        made: list[Span] = []
        links = [Link(link.get_span_context())] if link is not None else []
        for planned in trace.spans:
            if planned.parent is None:
                self._ids.preset(trace_id=int(trace.trace_id, 16),
                                 span_id=int(planned.span_id, 16) if planned.span_id else None)
                context = otel.set_span_in_context(otel.INVALID_SPAN)
                span = self._tracer.start_span(planned.name, context=context,
                                               attributes=planned.attributes, links=links,
                                               start_time=planned.start_ns)
                self._ids.preset(trace_id=None, span_id=None)
            else:
                span = self._tracer.start_span(
                    planned.name, context=otel.set_span_in_context(made[planned.parent]),
                    attributes=planned.attributes, start_time=planned.start_ns)
            for event in planned.events:
                span.add_event(event.name, attributes=dict(event.attributes),
                               timestamp=event.time_ns)
            if planned.error is not None:
                span.set_status(Status(StatusCode.ERROR, planned.error))
            made.append(span)
        recorded = sum(1 for span in made if span.is_recording())  # sampled in
        for span, planned in zip(made, trace.spans, strict=True):
            span.end(end_time=planned.end_ns)
        return recorded


def counting_exporter(inner: SpanExporter,
                      on_result: Callable[[Sequence[ReadableSpan], bool], None]) -> SpanExporter:
    """``inner`` (a ``SpanExporter``) that tells ``on_result(spans, success)`` of every batch
    (a class made here: the SDK is imported only with the telemetry extra)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    shut: list[bool] = []

    class CountingExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            try:
                result = inner.export(spans)
            except Exception:  # noqa: BLE001 - an exporter bug loses spans, never the run
                logger.debug("span export raised", exc_info=True)
                result = SpanExportResult.FAILURE
            on_result(spans, result == SpanExportResult.SUCCESS)
            return result

        def shutdown(self) -> None:
            # idempotent: :meth:`TraceExport.close` shuts the exporter down first, so its
            # retries against a collector that is down stop before the processor joins them
            if not shut:
                shut.append(True)
                inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(inner.force_flush(timeout_millis))

    return CountingExporter()
