"""The JSON Schemas shipped in the package are exactly what the artifact models export."""

from __future__ import annotations

import json

from voicelab.artifacts import SCHEMA_DIR
from voicelab.artifacts._schemas import schema_documents


def test_shipped_schemas_are_current():
    expected = schema_documents()
    shipped = {path.name: path.read_text(encoding="utf-8") for path in SCHEMA_DIR.glob("*.json")}
    stale = sorted(name for name in expected if shipped.get(name) != expected[name])
    assert not stale, f"regenerate with `python -m voicelab.artifacts._schemas`: {stale}"
    assert set(shipped) == set(expected)


def test_signal_fields_in_the_metrics_schema_are_the_seeds():
    schema = json.loads((SCHEMA_DIR / "voice-metrics.schema.json").read_text())
    signal = next(d for name, d in schema["$defs"].items() if "Signal" in name)
    assert set(signal["properties"]) == {
        "encoding", "sample_rate_hz", "channels", "byte_count", "duration_seconds",
        "silence_ratio", "peak_amplitude", "rms_amplitude", "clipped_sample_ratio",
        "possible_truncation"}
