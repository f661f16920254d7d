"""Telemetry: a run made visible where teams already look (docs/observability.md).

* OpenTelemetry traces (:class:`TraceExport`): each trial a trace under its recording's own
  trace id, with spans for the trial, user turns, product responses, tool calls, the outcome
  probe and judges, built after the trial from its bundle folder and exported by the SDK's
  batch processor over OTLP/HTTP; the run is a span every trial links to.
* Live Prometheus metrics (:class:`LiveMetrics`): trials started and finished, response latency
  and dead air, the flagged fraction, the current concurrency.

Both are :class:`voicelab.execution.RunObserver`\\ s; :class:`Telemetry` chooses them from the
command line's ``--otlp`` / ``--metrics-port`` and the standard ``OTEL_*`` variables. The
packages come with ``pip install 'voicelab[telemetry]'``; importing this package needs none.
"""

from ._setup import Telemetry, otlp_endpoint, shown_endpoint, traces_url
from ._spans import PlannedEvent, PlannedSpan, TrialTrace, trial_trace
from ._timeline import Timeline, TimelineEvent, read_timeline


def __getattr__(name: str) -> object:
    # the classes that need the optional packages are imported when asked for
    if name == "TraceExport":
        from ._export import TraceExport

        return TraceExport
    if name == "LiveMetrics":
        from ._metrics import LiveMetrics

        return LiveMetrics
    raise AttributeError(name)


# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "Telemetry",
    "read_timeline",
    "trial_trace",
]
