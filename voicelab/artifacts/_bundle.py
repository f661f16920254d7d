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

``trial-report.json`` and ``run-report.json`` are written atomically (temporary name, then
rename) and the trial report last, so a folder with a trial report is complete.
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


#: Large machine-oriented documents are written compactly (the C JSON encoder is ~10x faster).
COMPACT_DOCUMENTS = frozenset({"raw-endpoint-events.json", "interoperability.json"})


def _json_bytes(document: Any, *, pretty: bool = True) -> bytes:
    if isinstance(document, BaseModel):
        document = document.model_dump(mode="json")
    if pretty:
        text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    else:
        text = json.dumps(document, ensure_ascii=False, default=str, separators=(",", ":"))
    return (text + "\n").encode()


def _plain_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)


def write_json(path: Path, document: Any, *, pretty: bool = True, atomic: bool = True) -> Path:
    data = _json_bytes(document, pretty=pretty)
    (_atomic_write if atomic else _plain_write)(path, data)
    return path


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> Path:
    encode = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":")).encode
    lines = [encode(record) for record in records]
    _plain_write(path, ("\n".join(lines) + ("\n" if lines else "")).encode())
    return path


def write_text(path: Path, text: str) -> Path:
    _plain_write(path, text.encode())
    return path


def write_audio(path: Path, audio: PcmAudio) -> Path:
    _plain_write(path, wav_bytes(audio))
    return path


_WRITERS = None


def _writer_pool() -> Any:
    """A small shared pool: creating a file costs ~0.3 ms of disk latency here, and the
    syscalls release the GIL, so a trial's 17 files are written side by side."""
    global _WRITERS
    if _WRITERS is None:
        from concurrent.futures import ThreadPoolExecutor

        _WRITERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="voicelab-bundle")
    return _WRITERS


def write_trial_bundle(trial_dir: Path, *, documents: Mapping[str, Any],
                       jsonl: Mapping[str, Any] | None = None, texts: Mapping[str, str],
                       audio: Mapping[str, PcmAudio], report: BaseModel,
                       encoded: Mapping[str, bytes] | None = None) -> list[str]:
    """Write every file of a trial; ``trial-report.json`` last, so its presence means complete.

    ``encoded`` holds files already serialized by their owner (e.g. voice-events.jsonl)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[Path, bytes]] = [(trial_dir / name, data)
                                      for name, data in (encoded or {}).items()]
    jsonl = jsonl or {}
    for name, records in jsonl.items():
        encode = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":")).encode
        lines = [encode(record) for record in records]
        jobs.append((trial_dir / name, ("\n".join(lines) + ("\n" if lines else "")).encode()))
    for name, text in texts.items():
        jobs.append((trial_dir / name, text.encode()))
    for name, pcm in audio.items():
        jobs.append((trial_dir / name, wav_bytes(pcm)))
    for name, document in documents.items():
        jobs.append((trial_dir / name, _json_bytes(document, pretty=name not in COMPACT_DOCUMENTS)))
    written = [path.name for path, _ in jobs]
    for future in [_writer_pool().submit(_plain_write, path, data) for path, data in jobs]:
        future.result()
    written.append("trial-report.json")
    if hasattr(report, "files"):
        report.files = sorted(written)
    write_json(trial_dir / "trial-report.json", report)
    return written
