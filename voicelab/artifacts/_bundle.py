"""Writing bundles: each trial's folder as soon as it ends, and the run report.

Layout (the seed's tree)::

    <run dir>/
      run-report.json
      evaluator.log
      trial-001/
        transcript.json  transcript.md  tool-calls.json  raw-endpoint-events.json
        voice-events.jsonl  voice-metrics.json  interoperability.json
        user.wav  product.wav  mixed.wav        (each channel on the listener timeline)
        user-sent.wav  product-received.wav   (each direction's audio in arrival order)
        resolved-scenario.json  resolved-persona.json  resolved-data.json
        resolved-environment.json  resolved-script.json  resolved-settings.json
        trial-report.json
        persona-session.json      (only when the persona kept session evidence)

``trial-report.json`` and ``run-report.json`` are written atomically (temporary name, then
rename) and the trial report last, so a folder with a trial report is complete. Every other file
is created exclusively, never through a link (:func:`~._members.write_member`): a bundle being
re-scored or resumed cannot redirect a write outside itself.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._atomic import atomic_write, make_folder
from ..audio import PcmAudio, wav_buffer
from ._members import BundleMemberError, describe_mode, write_member
from ._names import INTEROPERABILITY, RAW_ENDPOINT_EVENTS, TRIAL_REPORT

#: Large machine-oriented documents are written compactly (the C JSON encoder, not the
#: pure-Python indenting one).
COMPACT_DOCUMENTS = frozenset({RAW_ENDPOINT_EVENTS, INTEROPERABILITY})


def _json_bytes(document: object, *, pretty: bool = True) -> bytes:
    if isinstance(document, BaseModel):
        # pydantic's own encoder: the text json.dumps writes (same indentation, separators and
        # key order, UTF-8 unescaped) without the pure-Python indenting encoder; floats in
        # shortest form (``1e-5``), NaN and infinities as null
        return document.model_dump_json(indent=2 if pretty else None,
                                        fallback=str).encode() + b"\n"
    if pretty:
        text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    else:
        text = json.dumps(document, ensure_ascii=False, default=str, separators=(",", ":"))
    return (text + "\n").encode()


def _plain_write(path: Path, *parts: bytes | memoryview) -> None:
    write_member(path, *parts)


def write_json(path: Path, document: object, *, pretty: bool = True, atomic: bool = True) -> Path:
    """Write a JSON document (a model or plain data), atomically unless told otherwise."""
    data = _json_bytes(document, pretty=pretty)
    (atomic_write if atomic else _plain_write)(path, data)
    return path


def write_text(path: Path, text: str) -> Path:
    _plain_write(path, text.encode())
    return path


_WRITERS = None


def _writer_pool() -> Any:
    """A small shared pool: creating a file waits for the disk, and the syscalls release the
    GIL, so a trial's files are written side by side."""
    global _WRITERS
    if _WRITERS is None:
        from concurrent.futures import ThreadPoolExecutor

        _WRITERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="voicelab-bundle")
    return _WRITERS


#: A file of a trial: the pieces to write one after another (no joining in memory), or audio
#: to write as a WAV file.
EncodedFile = tuple[str, tuple[bytes | memoryview, ...] | PcmAudio]


def encode_trial_files(*, documents: Mapping[str, object], texts: Mapping[str, str],
                       audio: Mapping[str, PcmAudio],
                       encoded: Mapping[str, bytes] | None = None) -> list[EncodedFile]:
    """Every file of a trial but its report, serialized (CPU work, no I/O).

    ``encoded`` holds files already serialized by their owner (e.g. voice-events.jsonl)."""
    files: list[EncodedFile] = [(name, (data,)) for name, data in (encoded or {}).items()]
    for name, text in texts.items():
        files.append((name, (text.encode(),)))
    for name, pcm in audio.items():
        files.append((name, pcm))  # written as WAV by the writer thread
    for name, document in documents.items():
        files.append((name, (_json_bytes(document, pretty=name not in COMPACT_DOCUMENTS),)))
    return files


@functools.cache
def _wav_header_bytes() -> int:
    """The bytes a WAV file adds to its samples (as :func:`wav_buffer` writes it)."""
    empty = PcmAudio.from_bytes(b"")
    return len(wav_buffer(empty)) - empty.byte_count


def encoded_bytes(files: Iterable[EncodedFile]) -> int:
    """How many bytes ``files`` take once written (their storage: docs/cost.md)."""
    total = 0
    for _, content in files:
        if isinstance(content, PcmAudio):
            total += _wav_header_bytes() + content.byte_count
        else:
            total += sum(len(part) for part in content)
    return total


def _write_file(path: Path, content: tuple[bytes | memoryview, ...] | PcmAudio) -> None:
    if isinstance(content, PcmAudio):
        _plain_write(path, wav_buffer(content))
    else:
        _plain_write(path, *content)


def _written_in_order(trial_dir: Path, files: list[EncodedFile]) -> list[OSError]:
    failures: list[OSError] = []
    for name, content in files:
        try:
            _write_file(trial_dir / name, content)
        except OSError as error:
            failures.append(error)
            (trial_dir / name).unlink(missing_ok=True)
    return failures


def _written_side_by_side(trial_dir: Path, files: list[EncodedFile]) -> list[OSError]:
    futures = [(name, _writer_pool().submit(_write_file, trial_dir / name, content))
               for name, content in files]
    failures: list[OSError] = []
    for name, future in futures:
        try:
            future.result()
        except OSError as error:
            failures.append(error)
            (trial_dir / name).unlink(missing_ok=True)
    return failures


def _check_folder(folder: Path) -> None:
    """A trial folder written into must be a folder itself, not a link to one elsewhere."""
    mode = os.lstat(folder).st_mode
    if not stat.S_ISDIR(mode):
        raise BundleMemberError(f"{describe_mode(mode) or 'no folder'} where a trial folder is "
                                f"written: refused", source=folder)


def write_trial_files(trial_dir: Path, files: list[EncodedFile], report: BaseModel, *,
                      also_present: Iterable[str] = (), side_by_side: bool = True) -> list[str]:
    """Write encoded files, then ``trial-report.json`` last, so its presence means the folder
    is complete (I/O only: meant for a worker thread). The report lists the files written and
    ``also_present`` (files of the folder kept as they were).

    ``side_by_side`` writes them from the shared writer pool (a thread of an event loop's
    process waits for the slowest file, not their sum); a process that does nothing else
    (the scoring process) writes them in order, which costs it less CPU than handing each
    file to a thread. Every file is attempted either way: what fits on the disk is kept, and a
    file cut short is removed (no evidence; it frees room for the trial report)."""
    make_folder(trial_dir)
    _check_folder(trial_dir)
    written = [name for name, _ in files]
    failures = (_written_side_by_side if side_by_side else _written_in_order)(trial_dir, files)
    if failures:
        raise failures[0]
    written.append(TRIAL_REPORT)
    if hasattr(report, "files"):
        report.files = sorted({*written, *also_present})
    write_json(trial_dir / TRIAL_REPORT, report)
    return written
