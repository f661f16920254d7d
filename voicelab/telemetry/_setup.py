"""Which telemetry a run gets: from ``--otlp`` / ``--metrics-port`` and the standard variables.

Traces are exported when ``--otlp URL`` is given, or when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a
base URL, ``/v1/traces`` appended) or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full traces
URL) is set and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none`` says no.
Everything else about the export comes from the other ``OTEL_*`` variables, read by the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from ._export import TraceExport
    from ._metrics import LiveMetrics

BASE_ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
TRACES_PATH = "v1/traces"


def _checked(url: str, *, key: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"must be an http:// or https:// URL (an OTLP/HTTP collector, e.g. "
                          f"http://localhost:4318), got {shown_endpoint(url)!r}",
                          source="CLI" if key.startswith("--") else "environment", key=key)
    return url


def traces_url(base: str) -> str:
    """The traces URL of an OTLP/HTTP base URL (``http://host:4318`` -> ``.../v1/traces``)."""
    base = base.rstrip("/")
    return base if base.endswith(f"/{TRACES_PATH}") else f"{base}/{TRACES_PATH}"


def otlp_endpoint(otlp: str | None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """The traces URL to export to, or None (no export)."""
    environ = os.environ if environ is None else environ
    if otlp:
        return traces_url(_checked(otlp, key="--otlp"))
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or \
            environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    full = environ.get(TRACES_ENDPOINT_VARIABLE, "").strip()
    if full:
        return _checked(full, key=TRACES_ENDPOINT_VARIABLE)
    base = environ.get(BASE_ENDPOINT_VARIABLE, "").strip()
    return traces_url(_checked(base, key=BASE_ENDPOINT_VARIABLE)) if base else None


def shown_endpoint(url: str) -> str:
    """The URL as written into a report or a message: no user, password or query (a
    collector's credentials go in ``OTEL_EXPORTER_OTLP_HEADERS``, never shown)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Telemetry:
    """The observers a run (or sweep) reports to, and their lifetime: pass :attr:`observers`
    to :func:`voicelab.arun` / :func:`voicelab.arun_matrix`; close it (or use ``with``) after.

    ``otlp`` / ``metrics_port`` as on the command line; ``environ`` is read for the
    ``OTEL_EXPORTER_OTLP_*`` endpoint variables (default: this process's environment).
    Missing packages raise the ``pip install 'voicelab[telemetry]'`` line before any run.
    """

    def __init__(self, *, otlp: str | None = None, metrics_port: int | None = None,
                 metrics_address: str = "127.0.0.1",
                 environ: Mapping[str, str] | None = None):
        self.observers: list[TraceExport | LiveMetrics] = []
        self.traces: TraceExport | None = None
        self.metrics: LiveMetrics | None = None
        endpoint = otlp_endpoint(otlp, environ=environ)
        if metrics_port is not None and not 0 <= metrics_port <= 65535:
            raise ConfigError(f"must be a port from 0 to 65535, got {metrics_port}",
                              source="CLI", key="--metrics-port")
        try:
            if endpoint is not None:
                from ._export import TraceExport

                self.traces = TraceExport(endpoint, shown=shown_endpoint(endpoint))
                self.observers.append(self.traces)
            if metrics_port is not None:
                from ._metrics import LiveMetrics

                try:
                    self.metrics = LiveMetrics(metrics_port, address=metrics_address)
                except OSError as error:
                    raise ConfigError(f"cannot serve metrics on {metrics_address}:"
                                      f"{metrics_port}: {error.strerror or error}",
                                      source="CLI", key="--metrics-port") from None
                self.observers.append(self.metrics)
        except BaseException:
            self.close()
            raise

    def __bool__(self) -> bool:
        return bool(self.observers)

    def close(self) -> None:
        for observer in self.observers:
            observer.close()
        self.observers = []

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
