"""Writing bundles: each trial's folder as soon as it ends, and the run report.

Layout (the seed's tree)::

    <run dir>/
      run-report.json
      evaluator.log
      trial-001/
        transcript.json  transcript.md  tool-calls.json  raw-endpoint-events.json
        voice-events.jsonl  voice-metrics.json  interoperability.json
        technician.wav  product.wav  mixed.wav
        resolved-scenario.json  resolved-persona.json  resolved-data.json
        resolved-environment.json  resolved-script.json  resolved-settings.json
        trial-report.json
        persona-session.json      (only when the persona kept session evidence)

Files are written atomically (temporary name, then rename) so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..audio import PcmAudio, wav_bytes

TRIAL_FILES = (
    "transcript.json", "transcript.md", "tool-calls.json", "raw-endpoint-events.json",
    "voice-events.jsonl", "voice-metrics.json", "interoperability.json", "technician.wav",
    "product.wav", "mixed.wav", "resolved-scenario.json", "resolved-persona.json",
    "resolved-data.json", "resolved-environment.json", "resolved-script.json",
    "resolved-settings.json", "trial-report.json",
)
RESOLVED_KINDS = ("scenario", "persona", "data", "environment", "script", "settings")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_FILE_MODE = 0o666 & ~_umask()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, _FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _json_bytes(document: Any) -> bytes:
    if isinstance(document, BaseModel):
        document = document.model_dump(mode="json")
    return (json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n").encode()


def write_json(path: Path, document: Any) -> Path:
    _atomic_write(path, _json_bytes(document))
    return path


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> Path:
    lines = [json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))
             for record in records]
    _atomic_write(path, ("\n".join(lines) + ("\n" if lines else "")).encode())
    return path


def write_text(path: Path, text: str) -> Path:
    _atomic_write(path, text.encode())
    return path


def write_audio(path: Path, audio: PcmAudio) -> Path:
    _atomic_write(path, wav_bytes(audio))
    return path


def write_trial_bundle(trial_dir: Path, *, documents: Mapping[str, Any], jsonl: Mapping[str, Any],
                       texts: Mapping[str, str], audio: Mapping[str, PcmAudio],
                       report: BaseModel) -> list[str]:
    """Write every file of a trial; ``trial-report.json`` last, so its presence means complete."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, records in jsonl.items():
        write_jsonl(trial_dir / name, records)
        written.append(name)
    for name, text in texts.items():
        write_text(trial_dir / name, text)
        written.append(name)
    for name, pcm in audio.items():
        write_audio(trial_dir / name, pcm)
        written.append(name)
    for name, document in documents.items():
        write_json(trial_dir / name, document)
        written.append(name)
    written.append("trial-report.json")
    if hasattr(report, "files"):
        report.files = sorted(written)
    write_json(trial_dir / "trial-report.json", report)
    return written
