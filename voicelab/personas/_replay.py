"""The replay persona: says again, sample for sample, what the user said in a recorded trial.

``persona_mode: replay`` with ``persona_settings: {bundle: RUN_DIR}`` (what ``voice-evaluator
replay`` configures): in trial ``N`` the persona reads ``RUN_DIR/trial-NNN`` and gives the
runner that trial's user turns in order, by turn id, each with the audio the product received
in the original call (``user-sent.wav``: the speech with the environment's noise already mixed
in, and through the ``to_product`` line when there was one), so the speech provider and the
mixer are bypassed. The runner's turn taking is unchanged: a turn starts when the simulated user
hears the product's reply end, whatever the product's new timing; a barge-in is spoken the same
``after_product_audio_ms`` into the reply as in the original (when the new reply is shorter
than that, the turn is said after it instead).

After the last recorded turn the persona ends the way the original did (``persona.ended``'s
exit reason), or with ``script_exhaustion``; an original that stopped at ``max_turns`` stops
there again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import JsonValue

from ..artifacts import (
    TRIAL_REPORT,
    USER_CLEAN_WAV,
    USER_SENT_WAV,
    VOICE_EVENTS,
    read_audio_stream,
    read_json,
    read_voice_events,
    require_retained_audio,
    trial_folder,
)
from ..audio import PcmAudio
from ..errors import ConfigError, ExecutionError
from ..recording import (
    EnvironmentMixed,
    EventAttributes,
    PersonaEnded,
    TrialEnded,
    UserBargeIn,
    UserTurnStarted,
)
from ._protocol import (
    PersonaContext,
    PersonaDecision,
    PersonaEnd,
    ProductResponse,
    RecordedSpeech,
    UserTurn,
)

#: What a recorded trial must hold to be replayed.
REPLAY_FILES = (TRIAL_REPORT, VOICE_EVENTS, USER_SENT_WAV)
#: Exit reasons a persona (not the product or the runner) gives; replay ends with the same.
PERSONA_EXITS = ("script_exhaustion", "persona_ended", "repeat_limit")


@dataclass(frozen=True)
class RecordedTurn:
    """One user turn of a recorded trial, as the product received it."""

    turn_id: str
    text: str
    audio: PcmAudio
    source_kind: str | None
    dtmf: str | None
    speech_span: tuple[int, int] | None
    #: the clean speech (``user-clean.wav``, kept with ``speech_metrics``), or None
    clean_audio: PcmAudio | None = None
    #: the original mix's figures (its ``environment.mixed`` event)
    mix_summary: Mapping[str, object] | None = None
    #: the product response this turn interrupted, and how far into it (None: a normal turn)
    barge_in_of: str | None = None
    after_product_audio_ms: float | None = None
    #: the script turn it said (a scripted trial's turns), so the replay judges the same
    #: ``script_turns_said``
    script_index: int | None = None


@dataclass(frozen=True)
class RecordedTrial:
    trial_dir: Path
    seed: int
    exit_reason: str
    turns: tuple[RecordedTurn, ...]
    persona_end: PersonaEnd | None


A = TypeVar("A", bound=EventAttributes)


def _attributes(model: type[A], record: Mapping[str, Any], *, line: int, where: Path) -> A:
    """A voice event's attributes as ``model`` (a bundle's value of the wrong type is refused,
    naming its line)."""
    attributes = record.get("attributes") or {}
    problem = model.check(attributes) if isinstance(attributes, Mapping) else "not an object"
    if problem is not None:
        raise ConfigError(f"line {line}: {record.get('event_type')} attributes.{problem}",
                          source=where)
    return model.model_validate(attributes)


def read_recorded_trial(trial_dir: Path) -> RecordedTrial:
    """The user turns of one trial folder (raises :class:`ConfigError` naming a missing or
    inconsistent file)."""
    trial_dir = Path(trial_dir)
    require_retained_audio(trial_dir, purpose="replayed")
    for name in REPLAY_FILES:
        if not (trial_dir / name).is_file():
            raise ConfigError(f"the trial folder has no {name}: it cannot be replayed",
                              source=trial_dir / name)
    report = read_json(trial_dir / TRIAL_REPORT)
    records = read_voice_events(trial_dir / VOICE_EVENTS)
    stream = _stream(trial_dir / USER_SENT_WAV)
    clean_path = trial_dir / USER_CLEAN_WAV
    clean_stream = _stream(clean_path) if clean_path.is_file() else None

    recorded = _scan_events(records, where=trial_dir / VOICE_EVENTS,
                            exit_reason=str(report.get("exit_reason", "")))
    if recorded.position > stream.shape[0]:
        raise ConfigError(f"the voice events reference {recorded.position} samples of the "
                          f"user's audio, which holds {stream.shape[0]}",
                          source=trial_dir / USER_SENT_WAV)
    if clean_stream is not None and recorded.clean_position > clean_stream.shape[0]:
        raise ConfigError(f"the voice events reference {recorded.clean_position} samples of "
                          f"the clean speech, which holds {clean_stream.shape[0]}",
                          source=clean_path)
    turns = tuple(_recorded_turn(turn_id, recorded, stream, clean_stream)
                  for turn_id in recorded.order)
    return RecordedTrial(trial_dir, int(report.get("seed", 0)), recorded.exit_reason, turns,
                         recorded.persona_end)


@dataclass
class _RecordedEvents:
    """What a trial's voice events say of its user turns, read in one pass."""

    exit_reason: str
    started: dict[str, UserTurnStarted] = field(default_factory=dict)
    #: the user turns in the order they started
    order: list[str] = field(default_factory=list)
    #: each turn's synthesized speech length, in samples
    lengths: dict[str, int] = field(default_factory=dict)
    #: each turn's audio chunks in the user's sent stream: (first sample, samples)
    pieces: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: where each turn's clean speech starts in the clean stream
    clean_at: dict[str, int] = field(default_factory=dict)
    barges: dict[str, UserBargeIn] = field(default_factory=dict)
    mixes: dict[str, Mapping[str, object]] = field(default_factory=dict)
    persona_end: PersonaEnd | None = None
    #: samples of the sent stream and of the clean stream the events account for
    position: int = 0
    clean_position: int = 0


def _scan_events(records: Sequence[Mapping[str, Any]], *, where: Path,
                 exit_reason: str) -> _RecordedEvents:
    """The user turns' events of ``records`` (the voice events read from ``where``)."""
    found = _RecordedEvents(exit_reason=exit_reason)
    for line, record in enumerate(records, start=1):
        kind = record.get("event_type")
        turn_id = record.get("turn_id")
        pcm = record.get("pcm") or {}
        if kind == "user.audio_chunk":
            count = int(pcm.get("byte_count", 0)) // 2
            if turn_id is not None:
                found.pieces.setdefault(turn_id, []).append((found.position, count))
            found.position += count
        elif kind == "user.turn_started" and turn_id is not None:
            found.started[turn_id] = _attributes(UserTurnStarted, record, line=line,
                                                 where=where)
            found.order.append(turn_id)
        elif kind == "speech.synthesized" and turn_id is not None and pcm:
            found.lengths[turn_id] = int(pcm.get("byte_count", 0)) // 2
            found.clean_at[turn_id] = found.clean_position
            found.clean_position += found.lengths[turn_id]
        elif kind == "user.barge_in" and turn_id is not None:
            found.barges[turn_id] = _attributes(UserBargeIn, record, line=line, where=where)
        elif kind == "environment.mixed" and turn_id is not None:
            found.mixes[turn_id] = _attributes(EnvironmentMixed, record, line=line,
                                               where=where).recorded()
        elif kind == "persona.ended":
            ended = _attributes(PersonaEnded, record, line=line, where=where)
            found.persona_end = PersonaEnd(ended.exit_reason or "script_exhaustion", 0.0,
                                           ended.message or "")
        elif kind == "trial.ended":
            found.exit_reason = _attributes(TrialEnded, record, line=line,
                                            where=where).exit_reason or found.exit_reason
    return found


def _recorded_turn(turn_id: str, recorded: _RecordedEvents, stream: np.ndarray,
                   clean_stream: np.ndarray | None) -> RecordedTurn:
    """One user turn as it was sent (and, when kept, as it was synthesized)."""
    said = recorded.started[turn_id]
    audio = np.concatenate([stream[start:start + count]
                            for start, count in recorded.pieces.get(turn_id, [])] or
                           [np.zeros(0, dtype=np.int16)])
    if turn_id in recorded.lengths:  # a line's last frame is padded with the line's background
        audio = audio[:recorded.lengths[turn_id]]
    start, end = said.speech_start_sample, said.speech_end_sample
    barge = recorded.barges.get(turn_id)
    clean = None
    if clean_stream is not None and turn_id in recorded.clean_at:
        at = recorded.clean_at[turn_id]
        clean = PcmAudio(np.ascontiguousarray(clean_stream[at:at + recorded.lengths[turn_id]]))
    return RecordedTurn(
        turn_id=turn_id, text=said.text or "",
        audio=PcmAudio(np.ascontiguousarray(audio, dtype=np.int16)),
        source_kind=said.source_kind, dtmf=said.dtmf or None,
        speech_span=(start, end) if start is not None and end is not None else None,
        clean_audio=clean, mix_summary=recorded.mixes.get(turn_id),
        barge_in_of=str(barge.response_turn_id) if barge else None,
        after_product_audio_ms=float(barge.after_product_audio_ms or 0.0)
        if barge else None, script_index=_script_index(said))


def _script_index(said: UserTurnStarted) -> int | None:
    index = (said.model_extra or {}).get("script_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else None


def _stream(path: Path) -> np.ndarray:
    try:
        return np.frombuffer(read_audio_stream(path), dtype="<i2")
    except ConfigError:
        raise
    except (OSError, ValueError) as error:  # a truncated or foreign WAV
        raise ConfigError(f"cannot read the audio: {error}", source=path) from None


def _max_turns(context: PersonaContext) -> int:
    limit = context.scenario.eval_spec.limits.max_turns
    turns = context.scenario.conversation.max_turns
    return min(turns, limit) if limit is not None else turns


class ReplayPersona:
    """See the module docstring."""

    def __init__(self, settings: Mapping[str, object], context: PersonaContext):
        self.check_settings(settings, context)
        self.bundle = Path(str(settings["bundle"]))
        self.trial_dir = self.bundle / trial_folder(context.trial_index)
        self.context = context
        self.trial: RecordedTrial | None = None
        self._given = 0  # recorded turns handed to the runner
        self._log: list[dict[str, JsonValue]] = []

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: PersonaContext) -> None:
        unknown = sorted(set(settings) - {"bundle"})
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)} (the replay persona "
                              f"takes bundle: RUN_DIR)", key="persona_settings")
        bundle = settings.get("bundle")
        if not isinstance(bundle, str | Path) or not str(bundle):
            raise ConfigError("the replay persona needs bundle: the run folder to replay",
                              key="persona_settings.bundle")
        if not Path(bundle).is_dir():
            raise ConfigError(f"no such run folder: {bundle}", key="persona_settings.bundle")

    async def start(self) -> None:
        try:
            self.trial = await asyncio.to_thread(read_recorded_trial, self.trial_dir)
        except ConfigError as error:
            raise ExecutionError(f"cannot replay {self.trial_dir}: {error}") from None

    @property
    def turns(self) -> Sequence[RecordedTurn]:
        return self.trial.turns if self.trial is not None else ()

    def _user_turn(self, recorded: RecordedTurn, *, barge_in: bool) -> UserTurn:
        metadata: dict[str, JsonValue] = {"replayed_turn": recorded.turn_id,
                                    "original_source_kind": recorded.source_kind}
        if recorded.barge_in_of is not None and not barge_in:
            # the new reply ended before the recorded barge-in point: said after it, and said so
            metadata["original_barge_in_of"] = recorded.barge_in_of
        if recorded.script_index is not None:
            metadata["script_index"] = recorded.script_index
        return UserTurn(
            text=recorded.text, audio=recorded.audio, source="replay", dtmf=recorded.dtmf,
            recorded=RecordedSpeech(recorded.speech_span, recorded.clean_audio,
                                    recorded.mix_summary),
            interrupt_after_seconds=(recorded.after_product_audio_ms or 0.0) / 1000.0
            if barge_in else None,
            metadata=metadata)

    def _next(self, reason: str) -> PersonaDecision:
        if self._given < len(self.turns):
            recorded = self.turns[self._given]
            self._given += 1
            self._log.append({"turn_id": recorded.turn_id, "reason": reason})
            return self._user_turn(recorded, barge_in=False)
        return self._end()

    def _end(self) -> PersonaDecision:
        trial = self.trial
        wait = self.context.script.post_script_completion_wait_seconds \
            if self.context.script is not None else 0.0
        if trial is not None and trial.exit_reason == "max_turns" \
                and self._given >= _max_turns(self.context):
            # the original user had more to say when the turn limit stopped the call: so does
            # this one (the runner stops before speaking it)
            return UserTurn(text="", audio=PcmAudio(np.zeros(0, dtype=np.int16)),
                            source="replay", metadata={"beyond_recording": True})
        if trial is not None and trial.persona_end is not None \
                and trial.persona_end.exit_reason in PERSONA_EXITS:
            end = trial.persona_end
            return PersonaEnd(end.exit_reason, wait, end.message)
        return PersonaEnd("script_exhaustion", wait, "every recorded user turn has been replayed")

    async def opening(self) -> PersonaDecision:
        return self._next("opening")

    def barge_in(self, response: ProductResponse) -> UserTurn | None:
        if self._given >= len(self.turns):
            return None
        recorded = self.turns[self._given]
        # the reply being heard answers the last turn given (turn-000: the product's opening)
        current = f"turn-{self._given:03d}"
        if recorded.barge_in_of != current:
            return None
        return self._user_turn(recorded, barge_in=True)

    def confirm_barge_in(self, turn: UserTurn) -> None:
        self._log.append({"turn_id": self.turns[self._given].turn_id, "reason": "barge_in"})
        self._given += 1

    async def reply(self, response: ProductResponse) -> PersonaDecision:
        return self._next("after_reply")

    def evidence(self) -> dict[str, JsonValue]:
        """persona-session.json: which recorded turn was said when (opening, after a reply,
        barge-in)."""
        return {"persona": "replay", "replay_of": str(self.trial_dir), "turns": list(self._log)}

    def choices(self) -> list[dict[str, JsonValue]]:
        return list(self._log)

    async def close(self) -> None:
        return None
