"""What a trial's bundle keeps: the run's ``retention:`` applied to its serialized files.

Runs and ingested calls keep a trial the same way: once the trial is scored (its status known,
its verdicts decided on the full words), :func:`retained_files` takes the files about to be
written, leaves out the audio the setting does not keep, passes every other file and the report
through the bundle's one filter of words (:func:`voicelab.artifacts.filter_member`: the run's
secrets always, its redaction rules when it asks for ``transcripts: redacted``), and returns
the report saying what was kept. Nothing is written and then deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._steps import Steps, run_steps
from ..artifacts import (
    COMPACT_DOCUMENTS,
    TOOL_CALLS,
    EncodedFile,
    Redacts,
    RunRetention,
    TrialReport,
    TrialRetention,
    filter_member,
    filter_model,
    is_audio_member,
    resolved_document,
)
from ..config import (
    BundleAccess,
    LoadedRun,
    Redaction,
    RetentionConfig,
    SecretScrubber,
    known_secrets_scrubber,
)
from ..scoring import Redactor, transcript_redactor

DATA_DOCUMENT = resolved_document("data")


def run_redactor(loaded: LoadedRun) -> Redactor:
    """The filter of every text a run's bundle holds (docs/artifacts.md, "Privacy"): the run's
    secrets (and those this process met outside its configuration, a store URL's); with
    ``retention.transcripts: redacted`` also the built-in PII patterns and the judges'
    redaction rules."""
    scrubber = loaded.scrubber.with_values(known_secrets_scrubber().secret_values)
    if loaded.run.retention.transcripts != "redacted":
        return Redactor(Redaction(), scrubber=scrubber)
    quality = loaded.run.quality_evaluation
    return transcript_redactor(quality.redaction if quality is not None else None,
                               scrubber=scrubber)


def process_redactor() -> Redactor:
    """The filter of what a command writes outside a run's configuration (``rescore``'s log):
    the secrets this process met (a store URL's); a bundle's own were masked when it ran."""
    return Redactor(Redaction(), scrubber=known_secrets_scrubber())


def runs_redactor(runs: Sequence[LoadedRun]) -> Redactor:
    """The filter of what several runs share (a sweep's matrix report): the redaction of the
    first run that redacts (else none), and every run's secrets."""
    chosen = next((loaded for loaded in runs
                   if loaded.run.retention.transcripts == "redacted"), runs[0])
    return run_redactor(chosen).with_secrets(
        {value for loaded in runs for value in loaded.scrubber.secret_values})


def strictest_access(runs: Sequence[LoadedRun]) -> BundleAccess:
    """Who may read a folder several runs share: the narrowest any of them allows."""
    chosen = {loaded.run.retention.access for loaded in runs}
    narrowest_first: tuple[BundleAccess, ...] = ("owner", "group", "umask")
    return next((access for access in narrowest_first if access in chosen), "owner")


def retained_files(files: Sequence[EncodedFile], report: TrialReport,
                   retention: RetentionConfig, *, redactor: Redactor | None = None
                   ) -> tuple[list[EncodedFile], TrialReport]:
    """The files of a scored trial its bundle keeps, and its report saying what was kept.

    ``files``: every file of the trial but its report, serialized (as
    :func:`voicelab.artifacts.encode_trial_files` makes them), not yet written; ``report``:
    the trial's report, its status decided. ``retention.audio``: ``all`` keeps every ``.wav``;
    ``failed`` only when the status is not ``passed``; ``none`` never. Every other file, and
    the report, pass ``redactor`` (a run passes :func:`run_redactor`; default: with
    ``retention.transcripts: redacted``, :func:`transcript_redactor` with no configured rules
    and no secrets, else nothing). With ``redacted``, the values of the run data's sensitive
    fields and of the tool calls' are redacted as words too (the judges' rule). The report
    returned has ``retention`` set when ``retention`` keeps less than everything; its
    ``files`` are set when it is written.
    """
    return run_steps(retention_steps(files, report, retention, redactor=redactor))


def retention_steps(files: Sequence[EncodedFile], report: TrialReport,
                    retention: RetentionConfig, *, redactor: Redactor | None = None
                    ) -> Steps[tuple[list[EncodedFile], TrialReport]]:
    """:func:`retained_files`, one filtered file per step (a trial scored on an event loop)."""
    keep_audio = retention.audio == "all" or (
        retention.audio == "failed" and report.status != "passed")
    dropped = sorted(name for name, _ in files if not keep_audio and is_audio_member(name))
    kept = [(name, content) for name, content in files if name not in dropped]
    words = redactor
    if retention.transcripts == "redacted":
        words = (redactor or transcript_redactor()).with_sensitive_values_from(
            *_sensitive_sources(kept))
    if words is not None:
        kept, report = yield from filtered_steps(kept, report, words)
    if retention.keeps_everything:
        return kept, report
    record = TrialRetention(audio_policy=retention.audio, transcripts=retention.transcripts,
                            audio="kept" if keep_audio else "dropped", dropped_files=dropped)
    return kept, report.model_copy(update={"retention": record})


def filtered_steps(files: Sequence[EncodedFile], report: TrialReport, words: Redacts
                   ) -> Steps[tuple[list[EncodedFile], TrialReport]]:
    """Every text file of a trial and its report through ``words``, one file per step: the
    bundle's one rule for what it writes (:func:`voicelab.artifacts.filter_member`)."""
    if words.changes_nothing:
        return list(files), report
    filtered: list[EncodedFile] = []
    for name, content in files:
        if isinstance(content, tuple):  # not audio still to be encoded
            data = _joined(content)
            out = filter_member(name, data, words, compact=name in COMPACT_DOCUMENTS)
            if out is not data:
                content = (out,)
            yield
        filtered.append((name, content))
    return filtered, filter_model(report, words)


def recorded_redactor(settings: Mapping[str, Any]) -> Redactor:
    """The filter a recorded run wrote its bundle with (its ``resolved-settings.json``): its
    redaction when it redacted; its secrets are masked there already, so none is known."""
    retention = settings.get("retention") if isinstance(settings, Mapping) else None
    if not isinstance(retention, Mapping) or retention.get("transcripts") != "redacted":
        return Redactor(Redaction(), scrubber=SecretScrubber())
    quality = settings.get("quality_evaluation")
    rules = quality.get("redaction") if isinstance(quality, Mapping) else None
    try:
        redaction = Redaction.model_validate(rules) if isinstance(rules, Mapping) else None
    except ValueError:
        redaction = None  # a damaged rule: the built-in patterns still apply
    return transcript_redactor(redaction)


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


def _joined(content: tuple[bytes | memoryview, ...]) -> bytes:
    return content[0] if len(content) == 1 and isinstance(content[0], bytes) \
        else b"".join(bytes(part) for part in content)


def _sensitive_sources(files: Iterable[EncodedFile]) -> list[Any]:
    """The run data and the tool calls: their sensitive fields' values are words to redact."""
    found: list[Any] = []
    for name, content in files:
        if name in (DATA_DOCUMENT, TOOL_CALLS) and isinstance(content, tuple):
            found.append(json.loads(_joined(content)))
    return found
