"""JSON Schemas of every artifact, exported into the package for external consumers.

Regenerate with ``python -m voicelab.artifacts._schemas`` (a test fails when they are stale).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from . import _models as m
from . import _report_models as reports
from . import _voice_models as voice

SCHEMA_DIR = Path(__file__).with_name("schemas")

SCHEMAS: dict[str, type[BaseModel]] = {
    "trial-report": m.TrialReport,
    "run-report": reports.RunReport,
    "matrix-report": reports.MatrixReport,
    "flakiness": reports.Flakiness,
    "transcript": m.Transcript,
    "tool-calls": m.ToolCalls,
    "raw-endpoint-events": m.RawEndpointEvents,
    "voice-event": voice.VoiceEvent,
    "voice-metrics": voice.VoiceMetrics,
    "interoperability": m.Interoperability,
    "resolved-document": m.ResolvedDocument,
}


def schema_documents() -> dict[str, str]:
    documents = {}
    for name, model in SCHEMAS.items():
        schema = model.model_json_schema()
        schema["$id"] = f"https://voicelab.invalid/schemas/{m.SCHEMA_VERSION}/{name}.json"
        schema["x-schema-version"] = m.SCHEMA_VERSION
        documents[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return documents


def export_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_documents().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in export_schemas():
        print(path)
