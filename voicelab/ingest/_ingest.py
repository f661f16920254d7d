"""Recorded calls into a bundle like a run's: one trial folder per call, scored by the run's code.

``ingest(calls, artifacts_dir=...)`` reads each call's two legs (:mod:`._sources`), cuts it into
turns (:mod:`._turns`), records it as a listening trial whose clock is the recording
(:mod:`._recording`) and scores that recording exactly as a simulated trial is scored
(:func:`voicelab.runner.score_on_loop`): placement, voice metrics, transcripts, verdicts,
judges, the trial's files. The run report says ``source: production``.

What the calls are judged by comes from a run file, when given (``run_file``): its scenario
(``expected_topics``, ``eval_spec``, entities), its judges and providers, ``transcription``,
``statistics``, ``gates`` and ``retention``; its endpoint, persona, script and environment are
not used (the caller and the agent are the recording). Without one, nothing is judged: the
calls' metrics and transcripts are the bundle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._atomic import make_folder
from .._limits import MAX_TURN_GAP_MS
from .._location import is_url
from ..artifacts import (
    CALL_SOURCE,
    SCHEMA_VERSION,
    RunFolder,
    RunReport,
    filter_model,
    trial_folder,
)
from ..audio import PcmAudio
from ..config import (
    QUIET_ENVIRONMENT,
    EndpointConfig,
    LoadedRun,
    PersonaConfig,
    RunConfig,
    ScenarioConfig,
    SecretScrubber,
    load_run,
    remember_text_filter,
)
from ..errors import ConfigError
from ..metrics import run_turn_metrics
from ..runner import (
    Call,
    RunInterrupted,
    RunOutcome,
    TrialResult,
    new_run_id,
    run_redactor,
    run_report,
    score_on_loop,
    scored_result,
    utc_now,
)
from ..scoring import verdict_checks
from ..speech import ASR_SOURCE, recognize, recognizer_installed
from ._recording import call_recording
from ._sources import (
    CallSource,
    CallTranscript,
    ChannelMap,
    check_call,
    read_call,
    read_manifest,
    stereo_call,
    unique_ids,
)
from ._turns import DEFAULT_TURN_GAP_MS, CallTurns, segment_call

logger = logging.getLogger(__name__)

#: What an ingested run's reports name as its source, persona, environment and adapter.
PRODUCTION = "production"
PRODUCTION_CALLER = "production caller"
#: A manifest is a YAML or JSON file; anything else is a call's audio.
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class IngestOptions:
    """How recorded calls are turned into a bundle: the silence that splits turns, the run's
    label, whether ``latest`` moves to it."""

    turn_gap_ms: float = DEFAULT_TURN_GAP_MS
    label: str | None = None
    link_latest: bool = True


@dataclass
class IngestOutcome(RunOutcome):
    """The bundle of the ingested calls (a run's outcome: report, trials, exit code)."""

    calls: list[CallSource] = field(default_factory=list)


def call_sources(calls: Sequence[CallSource | str | os.PathLike[str]], *,
                 channels: ChannelMap | None = None) -> list[CallSource]:
    """Calls given as sources, stereo files (mapped by ``channels``) or manifests
    (``.yaml``/``.yml``/``.json``), every one checked (files, channels, transcripts) before
    any is read."""
    sources: list[CallSource] = []
    for call in calls:
        if isinstance(call, CallSource):
            sources.append(call)
        elif Path(call).suffix.lower() in _MANIFEST_SUFFIXES:
            sources += read_manifest(Path(call))
        else:
            sources.append(stereo_call(Path(call), channels=channels))
    if not sources:
        raise ConfigError("no calls to ingest", source="CLI")
    sources = unique_ids(sources)
    for source in sources:
        check_call(source)
    return sources


def ingest_run(run_file: str | os.PathLike[str] | None = None, *,
               overrides: Sequence[str] = ()) -> LoadedRun:
    """What ingested calls are judged by (see the module docstring)."""
    if run_file is not None:
        loaded = load_run(Path(run_file), overrides=overrides)
    else:
        if overrides:
            raise ConfigError("--set needs a run file (--run-file) to apply to", source="CLI")
        here = Path.cwd()
        run = RunConfig(scenario_path=here, persona_path=here)
        loaded = LoadedRun(run_path=here / "ingest", run=run,
                           scenario=ScenarioConfig(id=PRODUCTION),
                           persona=PersonaConfig(name=PRODUCTION_CALLER), data={}, script=None,
                           environment=QUIET_ENVIRONMENT, sources={},
                           scrubber=SecretScrubber(set()), secret_keys={})
    return dataclasses.replace(
        loaded, persona=PersonaConfig(name=PRODUCTION_CALLER), script=None,
        environment=QUIET_ENVIRONMENT.model_copy(update={"name": PRODUCTION}),
        run=loaded.run.model_copy(update={"endpoint": EndpointConfig(adapter=PRODUCTION),
                                          "persona_mode": PRODUCTION, "speech_metrics": False}))


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _words_by_turn(spans: dict[str, tuple[int, int]], pieces: list[tuple[int, int, str]]
                   ) -> dict[str, str]:
    """Each piece of text (a transcript segment) to the span it overlaps most (the nearest
    when it overlaps none), joined in time order."""
    words: dict[str, list[str]] = {}
    for start, end, text in sorted(pieces):
        if not spans or not text.strip():
            continue
        best = max(spans, key=lambda key: (_overlap(spans[key], (start, end)),
                                           -abs(spans[key][0] - start)))
        words.setdefault(best, []).append(text.strip())
    return {key: " ".join(parts) for key, parts in words.items()}


def _transcribe(turns: CallTurns, transcript: CallTranscript | None, user_leg: PcmAudio) -> str:
    """Each turn's and response's words: from the call's transcript, else the caller's turns
    recognized (the responses are recognized in scoring, ``transcription.product: asr``).
    Returns where the caller's words came from."""
    rate = turns.sample_rate_hz
    if transcript is not None:
        def pieces(speaker: str) -> list[tuple[int, int, str]]:
            return [(int(s.start * rate), int(s.end * rate), s.text)
                    for s in transcript.segments if s.speaker == speaker]

        said = _words_by_turn({t.turn_id: (t.speech_start, t.speech_end)
                               for t in turns.user_turns}, pieces("user"))
        answered = _words_by_turn({r.turn_id: (r.start, r.end) for r in turns.responses},
                                  pieces("agent"))
        for turn in turns.user_turns:
            turn.text = said.get(turn.turn_id, "")
        for response in turns.responses:
            response.text = answered.get(response.turn_id, "")
        return "transcript"
    if not recognizer_installed():
        return "none"
    for turn in turns.user_turns:
        turn.text = recognize(PcmAudio(user_leg.samples[turn.speech_start:turn.speech_end],
                                       user_leg.sample_rate_hz))
    return ASR_SOURCE


def _call_run(loaded: LoadedRun, *, transcribed: bool) -> LoadedRun:
    """The run a call is scored with: the agent's words from its transcript (``wire``), or
    recognized from its leg (``asr``) when none was given and the recognizer is installed."""
    mode = "wire" if transcribed or not recognizer_installed() else "asr"
    transcription = loaded.run.transcription.model_copy(update={"product": mode})
    return dataclasses.replace(loaded, run=loaded.run.model_copy(
        update={"transcription": transcription}))


async def ingest_call(loaded: LoadedRun, call: CallSource, *, index: int, bundle: Path,
                      run_id: str, options: IngestOptions) -> TrialResult:
    """Read, cut, record and score one call into ``bundle/trial-NNN``."""
    audio = await asyncio.to_thread(read_call, call)
    turns = await asyncio.to_thread(segment_call, audio.user, audio.agent,
                                    turn_gap_ms=options.turn_gap_ms)
    source = await asyncio.to_thread(_transcribe, turns, audio.transcript, audio.user)
    if source == "none":
        logger.warning("%s: no transcript and no recognizer: the call's words are unknown "
                       "(pip install 'voicelab[speech]', or give CALL%s)", call.call_id,
                       ".transcript.json")
    recording = call_recording(turns, user=audio.user, agent=audio.agent, index=index,
                               session_id=call.call_id,
                               output_transcripts=audio.transcript is not None)
    trial_dir = bundle / trial_folder(index)
    make_folder(trial_dir)
    document = {"call_id": call.call_id, "run_id": run_id,
                "files": [str(path) for path in call.files],
                "transcript": str(call.transcript) if call.transcript else None,
                "channels": call.channels.model_dump() if call.audio is not None else None,
                "source_sample_rate_hz": audio.source_rate_hz,
                "duration_seconds": round(audio.duration_seconds, 3),
                "user_words": source, "turn_gap_ms": options.turn_gap_ms,
                "user_turns": len(turns.user_turns), "responses": len(turns.responses)}
    # the call's number is its seed: compare pairs trials by seed (a replay keeps them)
    scored_call = Call(recording, index, index, trial_dir, speech_metrics=False,
                       documents={CALL_SOURCE: {"schema_version": SCHEMA_VERSION, **document}})
    scored = await score_on_loop(_call_run(loaded, transcribed=audio.transcript is not None),
                                 scored_call)
    return scored_result(scored_call, scored)


async def aingest(calls: Sequence[CallSource | str | os.PathLike[str]], *,
                  artifacts_dir: str | os.PathLike[str],
                  run_file: str | os.PathLike[str] | None = None,
                  overrides: Sequence[str] = (),
                  options: IngestOptions | None = None) -> IngestOutcome:
    """Ingest recorded calls into a new run folder under ``artifacts_dir`` (see the module
    docstring). Raises :class:`~voicelab.errors.ConfigError` for a call that cannot be read
    (naming its file), before anything is written when the problem is in a file's header."""
    options = options or IngestOptions()
    gap = options.turn_gap_ms
    if isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 < gap <= MAX_TURN_GAP_MS:
        raise ConfigError(f"must be a number more than 0 and at most {MAX_TURN_GAP_MS:,g} ms, "
                          f"got {gap!r}", key="turn_gap_ms")
    if is_url(artifacts_dir):
        raise ConfigError("ingest writes to a local folder (publish the bundle to a store "
                          "afterwards, e.g. with rescore --output)",
                          key="artifacts_dir")
    sources = call_sources(calls)
    loaded = ingest_run(run_file, overrides=overrides)
    verdict_checks(loaded)  # the run file's own verdicts and metrics import before anything
    run_turn_metrics(loaded)  # is written
    words = run_redactor(loaded)
    if not words.changes_nothing:  # the command line's own lines say no more
        remember_text_filter(words.text)
    run_id = new_run_id()
    folder = RunFolder.create(artifacts_dir, run_id, command="ingest", report=RunReport,
                              access=loaded.run.retention.access)
    bundle = folder.path
    started = utc_now()
    results: list[TrialResult] = []
    status, message = "interrupted", ""
    with folder:
        folder.start_log(run_id=run_id, words=words)
        try:
            logger.info("ingest %s: %d call(s), bundle %s", run_id, len(sources), bundle)
            for index, call in enumerate(sources, start=1):
                try:
                    results.append(await ingest_call(loaded, call, index=index, bundle=bundle,
                                                     run_id=run_id, options=options))
                except Exception as error:
                    status = "failed"
                    message = f"{call.call_id} could not be ingested: {error}"
                    raise
                logger.info("%s: %s ingested", trial_folder(index), call.call_id)
            status = "complete"
        except asyncio.CancelledError:
            pass  # Ctrl-C, SIGTERM, a cancelled cell: the report says interrupted
        finally:
            report = run_report(loaded, run_id=run_id, bundle=bundle, results=results,
                                planned=len(sources), started=started, status=status,
                                label=options.label)
            report = filter_model(report.model_copy(update={
                "source": PRODUCTION, "message": message or report.message,
                "run_file": str(loaded.run_path) if run_file is not None else None}), words)
            # latest moves last: it names a bundle with its report
            problems = folder.finish(report, link_latest=options.link_latest)
            logger.info("ingest %s %s: %d/%d call(s) passed, %d unjudged", run_id, status,
                        report.passed_trials, report.trial_count, report.unjudged_trials)
            outcome = IngestOutcome(report, bundle, results, problems, calls=sources)
    if status == "interrupted":
        raise RunInterrupted(outcome)
    return outcome


def ingest(calls: Sequence[CallSource | str | os.PathLike[str]], *,
           artifacts_dir: str | os.PathLike[str], run_file: str | os.PathLike[str] | None = None,
           overrides: Sequence[str] = (), options: IngestOptions | None = None) -> IngestOutcome:
    """:func:`aingest` from synchronous code."""
    return asyncio.run(aingest(calls, artifacts_dir=artifacts_dir, run_file=run_file,
                               overrides=overrides, options=options))
