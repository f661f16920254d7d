"""What a trial's bundle keeps: the run's ``retention:`` applied to its serialized files.

Runs and ingested calls keep a trial the same way: once the trial is scored (its status known,
its verdicts decided on the full words), :func:`retained_files` takes the files about to be
written, leaves out the audio the setting does not keep and redacts the conversation's words
where it asks, and returns the report saying so. Nothing is written and then deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from .._steps import Steps, run_steps
from ..artifacts import (
    INTEROPERABILITY,
    PERSONA_SESSION,
    PRODUCT_LOG,
    RAW_ENDPOINT_EVENTS,
    TOOL_CALLS,
    TRANSCRIPT_JSON,
    TRANSCRIPT_MD,
    VOICE_EVENTS,
    VOICE_METRICS,
    EncodedFile,
    RunRetention,
    TrialReport,
    TrialRetention,
    encode_trial_files,
    resolved_document,
)
from ..config import LoadedRun, RetentionConfig
from ..recording import EventType
from ..scoring import Redactor, transcript_redactor

#: The events whose attributes hold the conversation's words (said, heard, passed to tools).
WORDED_EVENTS = frozenset({
    EventType.SPEECH_SYNTHESIZED, EventType.USER_TURN_STARTED, EventType.PERSONA_ENDED,
    EventType.PRODUCT_TRANSCRIPT, EventType.PRODUCT_INPUT_TRANSCRIPT,
    EventType.PRODUCT_TOOL_CALL, EventType.PRODUCT_TOOL_RESULT, EventType.PRODUCT_RAW,
    EventType.PRODUCT_ERROR})
_EVENT_TYPE = re.compile(rb'"event_type":"([^"]*)"')
_WORDED_TYPES = frozenset(kind.value.encode() for kind in WORDED_EVENTS)
#: The keys of the transcript documents that hold words (a turn's text, what the product heard).
_WORD_KEYS = frozenset({"text", "transcript", "heard_as"})
#: Raw messages of audio only: no words, and most of a call's messages.
_AUDIO_MESSAGES = frozenset({"audio_delta"})
SCRIPT_DOCUMENT = resolved_document("script")
DATA_DOCUMENT = resolved_document("data")


def run_redactor(loaded: LoadedRun) -> Redactor:
    """The redactor of a run's bundles (``retention.transcripts: redacted``): the built-in PII
    patterns, the judges' redaction rules when the run has judges, the run's secrets."""
    quality = loaded.run.quality_evaluation
    return transcript_redactor(quality.redaction if quality is not None else None,
                               scrubber=loaded.scrubber)


def retained_files(files: Sequence[EncodedFile], report: TrialReport,
                   retention: RetentionConfig, *, redactor: Redactor | None = None
                   ) -> tuple[list[EncodedFile], TrialReport]:
    """The files of a scored trial its bundle keeps, and its report saying what was kept.

    ``files``: every file of the trial but its report, serialized (as
    :func:`voicelab.artifacts.encode_trial_files` makes them), not yet written; ``report``:
    the trial's report, its status decided. ``retention.audio``: ``all`` keeps every ``.wav``;
    ``failed`` only when the status is not ``passed``; ``none`` never. ``retention.transcripts:
    redacted`` redacts the conversation's words in every file that holds them, and in the
    judges' payloads of the report, with ``redactor`` (default: :func:`transcript_redactor`
    with no configured rules and no secrets; a run passes :func:`run_redactor`). The values
    of the run data's sensitive fields and of the tool calls' are redacted as words too (the
    judges' rule). The report returned has ``retention`` set when ``retention`` keeps less
    than everything (else it is ``report`` itself); its ``files`` are set when it is written.
    """
    return run_steps(retention_steps(files, report, retention, redactor=redactor))


def retention_steps(files: Sequence[EncodedFile], report: TrialReport,
                    retention: RetentionConfig, *, redactor: Redactor | None = None
                    ) -> Steps[tuple[list[EncodedFile], TrialReport]]:
    """:func:`retained_files`, one redacted file per step (a trial scored on an event loop)."""
    if retention.keeps_everything:
        return list(files), report
    keep_audio = retention.audio == "all" or (
        retention.audio == "failed" and report.status != "passed")
    dropped = sorted(name for name, _ in files if not keep_audio and _is_audio(name))
    kept = [(name, content) for name, content in files if name not in dropped]
    if retention.transcripts == "redacted":
        words = (redactor or transcript_redactor()).with_sensitive_values_from(
            *_sensitive_sources(kept))
        redacted: list[EncodedFile] = []
        for name, content in kept:
            redact = _REDACTORS.get(name)
            if redact is not None and isinstance(content, tuple):  # not audio
                content = _encoded(name, redact(_joined(content), words))
                yield
            redacted.append((name, content))
        kept = redacted
        report = report.model_copy(update={"judges": [
            judge.model_copy(update={"sent": words.value(judge.sent)})
            if judge.sent is not None else judge for judge in report.judges]})
    record = TrialRetention(audio_policy=retention.audio, transcripts=retention.transcripts,
                            audio="kept" if keep_audio else "dropped", dropped_files=dropped)
    return kept, report.model_copy(update={"retention": record})


def run_retention(retention: RetentionConfig, reports: Iterable[TrialReport]
                  ) -> RunRetention | None:
    """The run report's account of what ``retention`` kept of ``reports`` (None: it keeps
    everything)."""
    if retention.keeps_everything:
        return None
    dropped = [r.retention is not None and r.retention.audio == "dropped" for r in reports]
    return RunRetention(audio=retention.audio, transcripts=retention.transcripts,
                        audio_dropped_trials=sum(dropped),
                        audio_kept_trials=len(dropped) - sum(dropped))


def _is_audio(name: str) -> bool:
    return name.lower().endswith(".wav")


def _joined(content: tuple[bytes | memoryview, ...]) -> bytes:
    return b"".join(bytes(part) for part in content)


def _encoded(name: str, content: Any) -> tuple[bytes | memoryview, ...]:
    if isinstance(content, bytes):
        return (content,)
    if isinstance(content, str):
        return (content.encode(),)
    [(_, encoded)] = encode_trial_files(documents={name: content}, texts={}, audio={})
    return cast(tuple[bytes | memoryview, ...], encoded)


def _sensitive_sources(files: Iterable[EncodedFile]) -> list[Any]:
    """The run data and the tool calls: their sensitive fields' values are words to redact."""
    found: list[Any] = []
    for name, content in files:
        if name in (DATA_DOCUMENT, TOOL_CALLS) and isinstance(content, tuple):
            found.append(json.loads(_joined(content)))
    return found


# --- each file's words ------------------------------------------------------------------------

def _words_under_keys(value: Any, redactor: Redactor) -> Any:
    """``value`` with the strings under :data:`_WORD_KEYS` (at any depth) redacted."""
    if isinstance(value, dict):
        return {key: redactor.text(item) if key in _WORD_KEYS and isinstance(item, str)
                else _words_under_keys(item, redactor) for key, item in value.items()}
    if isinstance(value, list):
        return [_words_under_keys(item, redactor) for item in value]
    return value


def _transcript(data: bytes, redactor: Redactor) -> Any:
    return _words_under_keys(json.loads(data), redactor)


def _markdown(data: bytes, redactor: Redactor) -> str:
    title, _, rest = data.decode().partition("\n")
    return f"{title}\n{redactor.text(rest)}"


def _interoperability(data: bytes, redactor: Redactor) -> Any:
    document = json.loads(data)
    document["transcript"] = _words_under_keys(document.get("transcript", []), redactor)
    document["tool_calls"] = redactor.value(document.get("tool_calls", []))
    return document


def _tool_calls(data: bytes, redactor: Redactor) -> Any:
    document = json.loads(data)
    document["tool_calls"] = redactor.value(document.get("tool_calls", []))
    return document


def _raw_events(data: bytes, redactor: Redactor) -> Any:
    document = json.loads(data)
    for event in document.get("events", []):
        if isinstance(event, dict) and event.get("type") not in _AUDIO_MESSAGES:
            event["raw"] = redactor.value(event.get("raw"))
    return document


def _voice_events(data: bytes, redactor: Redactor) -> bytes:
    lines = data.split(b"\n")
    for index, line in enumerate(lines):
        kind = _EVENT_TYPE.search(line)
        if kind is None or kind.group(1) not in _WORDED_TYPES:
            continue
        record = json.loads(line)
        record["attributes"] = redactor.value(record.get("attributes"))
        lines[index] = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    return b"\n".join(lines)


def _whole_document(data: bytes, redactor: Redactor) -> Any:
    return redactor.value(json.loads(data))


def _script(data: bytes, redactor: Redactor) -> Any:
    document = json.loads(data)
    document["resolved"] = redactor.value(document.get("resolved"))
    return document


def _text(data: bytes, redactor: Redactor) -> str:
    return redactor.text(data.decode(errors="replace"))


#: How each file that holds the conversation's words is redacted (every other file is kept as
#: it is: the configuration, the metrics but their transcripts, the audio).
_REDACTORS: dict[str, Callable[[bytes, Redactor], Any]] = {
    TRANSCRIPT_JSON: _transcript,
    TRANSCRIPT_MD: _markdown,
    VOICE_METRICS: _transcript,
    VOICE_EVENTS: _voice_events,
    INTEROPERABILITY: _interoperability,
    TOOL_CALLS: _tool_calls,
    RAW_ENDPOINT_EVENTS: _raw_events,
    PERSONA_SESSION: _whole_document,
    PRODUCT_LOG: _text,
    SCRIPT_DOCUMENT: _script,
}
