"""One trial folder re-scored: its recording rebuilt from the files it kept, its derived files
and trial report computed again by the code that ran after the call. ``rescore`` repeats this for
every trial folder of a bundle; it is its own module because it needs nothing of the folder walk,
the store staging or the run and matrix reports rewritten afterwards, which reach it only through
:func:`rescore_trial`, :func:`read_recording`, :data:`RESCORED_FILES` and ``_model`` (a recorded
document read as its model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..artifacts import (
    INTEROPERABILITY,
    LEGACY_NAMES,
    MIXED_WAV,
    PRODUCT_WAV,
    TOOL_CALLS,
    TRANSCRIPT_JSON,
    TRANSCRIPT_MD,
    TRIAL_REPORT,
    USER_WAV,
    VOICE_EVENTS,
    VOICE_METRICS,
    ArtifactVersionError,
    TrialReport,
    TurnMetrics,
    encoded_bytes,
    read_audio_stream,
    read_json,
    require_retained_audio,
    resolved_document,
    write_trial_files,
)
from ..config import (
    MeasurementConfig,
    PersonaConfig,
    ScenarioConfig,
    ScriptConfig,
    TranscriptionConfig,
    parse_settings,
)
from ..cost import trial_cost
from ..errors import ConfigError
from ..metrics import EntityPlan, keep_recorded_columns
from ..recording import PRODUCT, USER, USER_CLEAN, USER_HEARD, Recording, recording_from_records
from ..scoring import recorded_plugin_verdicts
from ._evidence import (
    STREAM_FILES,
    assemble_now,
    evidence_files,
    followed_script,
    score_of,
)
from ._report import CallEnding, CallTiming, TrialIdentity, trial_report
from ._reprice import bytes_on_disk, recorded_pricing
from ._rescore_overrides import AS_RECORDED, RescoreOverrides
from ._rescored import RescoredTrial
from ._retention import filtered_steps, recorded_redactor
from ._transcription import ProductTranscription

#: Files ``rescore`` writes again (everything else in a trial folder is a raw fact it keeps).
RESCORED_FILES = (TRANSCRIPT_JSON, TRANSCRIPT_MD, TOOL_CALLS, VOICE_METRICS,
                  INTEROPERABILITY, USER_WAV, PRODUCT_WAV, MIXED_WAV,
                  TRIAL_REPORT)


def _document(trial_dir: Path, name: str) -> dict[str, Any]:
    return read_json(trial_dir / name)


def _resolved(trial_dir: Path, kind: str) -> Any:
    return _document(trial_dir, resolved_document(kind)).get("resolved")


def read_recording(trial_dir: Path) -> Recording:
    """The recording of one trial folder (schema 2.0 or newer)."""
    from ..artifacts import read_voice_events

    trial_dir = Path(trial_dir)
    require_retained_audio(trial_dir, purpose="re-scored")
    streams: dict[str, bytes] = {}
    for name in (USER, PRODUCT, USER_CLEAN, USER_HEARD):
        path = trial_dir / STREAM_FILES[name]
        if path.is_file():
            streams[name] = read_audio_stream(path)
        elif name in (USER, PRODUCT):
            raise ArtifactVersionError(
                f"no {STREAM_FILES[name]}: a bundle written before schema 2.0 keeps no "
                f"arrival-ordered audio and cannot be re-scored", source=trial_dir)
    records = read_voice_events(trial_dir / VOICE_EVENTS)
    return recording_from_records(records, streams=streams,
                                  where=str(trial_dir / VOICE_EVENTS))


def _model(model: type[Any], document: Any, *, source: Path) -> Any:
    return parse_settings(model, document, key=None, source=source)


def _overridden(model: type[Any], document: Any, *, source: Path,
                overrides: RescoreOverrides, prefix: str | None = None) -> Any:
    """A recorded document with the re-score's overrides: a value they made invalid is blamed
    on the ``--set`` (exit 2), not on the bundle."""
    try:
        return _model(model, document, source=source)
    except ConfigError as error:
        if not overrides:
            raise
        given = [o.label for o in overrides.given if prefix is None or o.path[0] == prefix]
        key = f"{prefix}.{error.key}" if prefix and error.key else error.key or prefix
        raise ConfigError(error.message, source=" ".join(given) or source, key=key) from None


def _script(trial_dir: Path) -> ScriptConfig | None:
    """The script the trial ran with (``None``: it had none, or the bundle kept none)."""
    path = trial_dir / resolved_document("script")
    resolved = _resolved(trial_dir, "script") if path.is_file() else None
    return None if resolved is None else _model(ScriptConfig, resolved, source=path)


def rescore_trial(trial_dir: Path, *, speech_metrics: bool | None = None,
                  judges_run: Any = None,
                  overrides: RescoreOverrides = AS_RECORDED) -> RescoredTrial:
    """Recompute one trial folder in place (see the module docstring), judged with the
    re-score's ``overrides`` (``rescore --set``) over what the trial recorded."""
    trial_dir = Path(trial_dir)
    previous = _model(TrialReport, _document(trial_dir, TRIAL_REPORT),
                      source=trial_dir / TRIAL_REPORT)
    scenario_file = trial_dir / resolved_document("scenario")
    scenario = _overridden(ScenarioConfig, overrides.scenario(
        _resolved(trial_dir, "scenario"), file=str(scenario_file)), source=scenario_file,
        overrides=overrides)
    persona = _model(PersonaConfig, _resolved(trial_dir, "persona"),
                     source=trial_dir / resolved_document("persona"))
    settings_file = trial_dir / resolved_document("settings")
    settings = overrides.settings(_resolved(trial_dir, "settings") or {},
                                  file=str(settings_file))
    recording = read_recording(trial_dir)
    if speech_metrics is None:
        speech_metrics = bool(settings.get("speech_metrics"))
    measurement = _overridden(MeasurementConfig, settings.get("measurement") or {},
                              source=settings_file, overrides=overrides, prefix="measurement")
    judged = settings.get("quality_evaluation") is not None or (
        judges_run is not None and judges_run.run.quality_evaluation is not None)
    transcription_config = _overridden(TranscriptionConfig, settings.get("transcription") or {},
                                       source=settings_file, overrides=overrides,
                                       prefix="transcription")
    transcription = ProductTranscription.of(transcription_config, scenario, persona,
                                            judges=judged)
    evidence = assemble_now(recording, adapter=previous.adapter, speech_metrics=speech_metrics,
                            measurement=measurement, transcription=transcription,
                            entities=EntityPlan.of(scenario, transcription_config))
    _keep_own_columns(evidence.metrics.turns, settings, trial_dir)
    ending = CallEnding.of_recording(recording, report=previous)
    # files that could not be written when the trial ran: a fact of the bundle, not the call
    bundle_failures = [f for f in previous.failures if f.kind == "artifacts"]
    judges = previous.judges
    if judges_run is not None and ending.executed and not bundle_failures:
        from ..scoring import run_judges

        judges = asyncio.run(run_judges(judges_run, evidence.transcript.turns,
                                        evidence.tool_calls.tool_calls))
    report = trial_report(
        TrialIdentity.of_report(previous), ending, CallTiming.of_report(previous),
        score=score_of(evidence, ending, judges, scenario=scenario, persona=persona,
                       script=followed_script(settings.get("persona_mode"),
                                              _script(trial_dir)),
                       kept=recorded_plugin_verdicts(previous.verdicts)),
        trace_id=recording.trace_id, bundle_failures=bundle_failures, files=previous.files,
        attempt=previous.attempt, attempts=previous.attempts, extra=previous.model_extra)
    report.retention = previous.retention  # what the run kept stays what it kept
    verdicts = report.verdicts
    title = f"{report.scenario_id} — {report.trial_id} (seed {report.seed})"
    from .._steps import run_steps

    files = run_steps(evidence_files(recording, evidence, report, title=title,
                                     keep_clean_speech=False))
    keep = set(RESCORED_FILES)
    files = [(name, parts) for name, parts in files if name in keep]
    # written as the run wrote it: redacted when it redacted (the one rule of its bundle)
    files, report = run_steps(filtered_steps(files, report, recorded_redactor(settings)))
    # a derived file an earlier bundle version named otherwise is written under its name now
    superseded = {old for name in keep for old in LEGACY_NAMES.get(name, ())}
    for old in superseded:
        (trial_dir / old).unlink(missing_ok=True)
    kept = [p.name for p in trial_dir.iterdir()
            if not p.name.startswith(".") and p.name not in superseded]
    rewritten = {name for name, _ in files}
    # priced under the table the run recorded (resolved-settings.json), as when it ran; a
    # bundle written before costs were kept stays without (rescore --pricing prices it)
    report.cost = None if previous.cost is None else trial_cost(
        recording, recorded_pricing(settings, source=trial_dir), adapter=previous.adapter,
        judges=report.judges, recognition=evidence.recognition,
        storage_bytes=encoded_bytes(files) + bytes_on_disk(
            trial_dir, [name for name in kept if name not in rewritten]))
    write_trial_files(trial_dir, files, report, also_present=kept)
    before = {v.name: v.passed for v in previous.verdicts}
    changed = [v.name for v in verdicts if before.get(v.name) != v.passed]
    return RescoredTrial(trial_dir, report, previous, changed, evidence.metrics.turns,
                         evidence.metrics.probes)


def _keep_own_columns(turns: Sequence[TurnMetrics], settings: Mapping[str, object],
                      trial_dir: Path) -> None:
    """A run with per-response metrics of its own (``turn_metrics:``) keeps their columns as
    it wrote them: nothing a bundle names is imported."""
    if settings.get("turn_metrics"):
        keep_recorded_columns(turns, _document(trial_dir, VOICE_METRICS).get("turns") or [])
