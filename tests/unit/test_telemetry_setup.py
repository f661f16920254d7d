"""Which telemetry a run gets (the OTLP endpoint from --otlp or the standard variables), what a
report may show of it, and the one install line a missing package becomes."""

from __future__ import annotations

import sys

import pytest

from voicelab.errors import ConfigError, MissingDependencyError
from voicelab.telemetry import Telemetry, otlp_endpoint, shown_endpoint, traces_url


def test_the_endpoint_comes_from_the_option_then_the_standard_variables():
    assert otlp_endpoint(None, environ={}) is None
    assert otlp_endpoint("http://collector:4318", environ={}) == \
        "http://collector:4318/v1/traces"
    assert otlp_endpoint("http://collector:4318/v1/traces/", environ={}) == \
        "http://collector:4318/v1/traces"
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example:4318/"}
    assert otlp_endpoint(None, environ=base) == "https://otel.example:4318/v1/traces"
    # the traces URL is used as it is, and wins over the base URL
    full = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t.example/ingest"}
    assert otlp_endpoint(None, environ=full) == "https://t.example/ingest"
    for off in ({"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}):
        assert otlp_endpoint(None, environ={**base, **off}) is None
        assert otlp_endpoint("http://c:4318", environ={**base, **off}) == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"


def test_a_bad_endpoint_is_a_configuration_error_naming_where_it_came_from():
    with pytest.raises(ConfigError) as option:
        otlp_endpoint("collector:4318", environ={})
    assert option.value.key == "--otlp" and "http:// or https://" in str(option.value)
    with pytest.raises(ConfigError) as variable:
        otlp_endpoint(None, environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://c:4317"})
    assert variable.value.key == "OTEL_EXPORTER_OTLP_ENDPOINT"


def test_a_report_never_shows_credentials_of_the_endpoint():
    assert shown_endpoint("https://user:secret@otel.example:4318/v1/traces?token=x") == \
        "https://otel.example:4318/v1/traces"


def test_a_missing_package_is_the_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    with pytest.raises(MissingDependencyError) as missing:
        Telemetry(otlp="http://127.0.0.1:4318", environ={})
    assert str(missing.value).endswith(
        "exporting traces (--otlp) needs the 'opentelemetry-sdk' package: "
        "pip install 'voicelab[telemetry]'")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(MissingDependencyError) as metrics:
        Telemetry(metrics_port=0, environ={})
    assert "pip install 'voicelab[telemetry]'" in str(metrics.value)


def test_a_port_out_of_range_is_refused():
    with pytest.raises(ConfigError) as refused:
        Telemetry(metrics_port=70000, environ={})
    assert refused.value.key == "--metrics-port"
