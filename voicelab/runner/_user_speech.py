"""What the simulated user says, made ready before it is said: a turn's clean speech
(synthesized, prerecorded, replayed or keys only), where its speech is, and what making it cost.

Kept apart from the conversation loop (:mod:`._conversation`), which decides *when* a turn is
said: a script's turns are synthesized before the call (:meth:`TurnSpeech.warm_up`) and a
barge-in long before it is spoken (:meth:`TurnSpeech.soon`), each turn once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, SpeechBounds, speech_bounds
from ..personas import PlansTurns, UserTurn
from ..recording import Recording
from ..speech import Synthesis, synthesizes_ahead
from ._hesitation import PauseSpan, join_with_pauses

#: A turn that only presses keys is this much of the line's silence, then the keys.
KEYS_ONLY_SECONDS = 0.1
#: Turns synthesized at once before the call (see :meth:`TurnSpeech.warm_up`).
WARM_UP_AT_ONCE = 4


@dataclass
class Prepared:
    """A user turn ready to be spoken: its clean speech, where the speech is, how it was made."""

    clean: PcmAudio
    info: dict[str, Any]
    bounds: SpeechBounds | None
    #: what to send as it is, the environment already in it, and the figures of the mix that
    #: made it (a replayed turn); None: ``clean`` is mixed with the environment
    delivered: PcmAudio | None = None
    mix_summary: dict[str, Any] = field(default_factory=dict)
    #: a hesitation turn's pauses in ``clean`` (samples: first silent, first of the next piece)
    pauses: tuple[PauseSpan, ...] = ()
    #: the turn goes on past its audio: it was cut at the trial's time limit (saying it ends
    #: the trial with ``max_time``)
    truncated: bool = False

    @property
    def num_samples(self) -> int:
        return max(self.clean.num_samples,
                   self.delivered.num_samples if self.delivered is not None else 0)

    def cut(self, samples: int) -> Prepared:
        """The first ``samples`` of the turn (what fits before the time limit), marked
        ``truncated`` when that is not all of it; views, nothing copied."""
        if self.num_samples <= samples:
            return self
        samples = max(0, samples)

        def head(audio: PcmAudio) -> PcmAudio:
            return PcmAudio(audio.samples[:samples], audio.sample_rate_hz)

        bounds = self.bounds
        if bounds is not None:
            bounds = None if bounds.start_sample >= samples else \
                replace(bounds, end_sample=min(bounds.end_sample, samples))
        return replace(self, clean=head(self.clean),
                       delivered=head(self.delivered) if self.delivered is not None else None,
                       bounds=bounds, truncated=True,
                       pauses=tuple((start, min(end, samples)) for start, end in self.pauses
                                    if start < samples))


class TurnSpeech:
    """Makes each user turn's audio once (:class:`Prepared`), for one trial: ``speech`` in
    ``voice`` with the trial's ``seed``, no turn longer than ``trial_samples`` (the trial's time
    limit), what each synthesis spent recorded on ``recording``."""

    def __init__(self, *, speech: Any, recording: Recording, voice: str | None, seed: int,
                 trial_samples: int):
        self.speech = speech
        self.recording = recording
        self.voice = voice
        self.seed = seed
        self.trial_samples = trial_samples
        self._tasks: dict[Any, asyncio.Task[Prepared]] = {}

    async def warm_up(self, persona: object) -> None:
        """Synthesize the turns the persona already knows (a script) before the call, so no
        synthesis delay sits between a decision to speak and the first sample on the line.
        Not for a provider that synthesizes in about a millisecond (``synthesize_ahead =
        False``): a turn is synthesized when spoken, one never spoken costs nothing.

        In script order, ``WARM_UP_AT_ONCE`` at a time, and only until the turns made add up
        to the trial's time limit (the most a call can say): a long script's later turns are
        synthesized when they are spoken, so what is made ahead follows the limit, not the
        script's length."""
        if not isinstance(persona, PlansTurns) or not synthesizes_ahead(self.speech):
            return
        waiting = [UserTurn(text=turn.text, pieces=turn.pieces,
                            pauses_seconds=turn.pauses_seconds)
                   for turn in persona.planned_turns() if turn.audio is None and turn.text]
        made = 0
        running: set[asyncio.Task[Prepared]] = set()
        while waiting or running:
            while waiting and len(running) < WARM_UP_AT_ONCE and made < self.trial_samples:
                running.add(self.soon(waiting.pop(0)))
            if not running:
                return
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            made += sum(task.result().num_samples for task in done
                        if not task.cancelled() and task.exception() is None)

    def soon(self, turn: UserTurn) -> asyncio.Task[Prepared]:
        """Start preparing ``turn`` now (a barge-in is decided long before it is spoken)."""
        key: Hashable = id(turn.audio) if turn.audio is not None else \
            (turn.pieces, turn.pauses_seconds) if turn.pauses_seconds else turn.text
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = asyncio.create_task(self._synthesize(turn))
        return task

    async def _synthesize(self, turn: UserTurn) -> Prepared:
        if turn.audio is None and not turn.text.strip() and turn.dtmf:
            # keys only: a moment of the line's silence, then the keys
            silence = PcmAudio(np.zeros(int(KEYS_ONLY_SECONDS * CANONICAL_SAMPLE_RATE_HZ),
                                        dtype=np.int16))
            return Prepared(silence, {"provider": "dtmf", "cached": False}, None)
        if turn.audio is None and turn.pauses_seconds:
            return await self._synthesize_hesitation(turn)
        cap = self.trial_samples
        if turn.audio is not None:
            clean = turn.audio
            info: dict[str, Any] = {"provider": turn.source, "cached": False, "prerecorded": True}
        else:
            synthesis = await self.speech.synthesize(turn.text, voice=self.voice, seed=self.seed)
            self._spent(synthesis)
            clean = synthesis.audio
            info = {"provider": synthesis.provider, "voice": synthesis.voice,
                    "cached": synthesis.cached, "cache": synthesis.metadata.get("cache", "none")}
            if synthesis.metadata.get("rendering"):  # the voice, rate and pitch it applied
                info["rendering"] = synthesis.metadata["rendering"]
        recorded = turn.recorded
        if recorded is None or turn.audio is None:
            whole = clean.num_samples
            clean = clean if whole <= cap else PcmAudio(clean.samples[:cap], clean.sample_rate_hz)
            return Prepared(clean, info, speech_bounds(clean), truncated=whole > cap)
        clean = recorded.clean if recorded.clean is not None else turn.audio
        bounds = SpeechBounds(*recorded.speech_span) if recorded.speech_span is not None \
            else None
        prepared = Prepared(clean, info, bounds, turn.audio,
                            dict(recorded.mix_summary or {})).cut(cap)
        if prepared.bounds is None and recorded.speech_span is None:
            prepared = replace(prepared, bounds=speech_bounds(prepared.clean))
        return prepared

    async def _synthesize_hesitation(self, turn: UserTurn) -> Prepared:
        """A turn with pauses: each piece synthesized, joined with that much silence. Neither
        a piece nor a silence is made past the trial's time limit: the pieces are synthesized
        in order until the turn is that long, and the join stops there."""
        cap = self.trial_samples
        syntheses = []
        length = 0
        for index, piece in enumerate(turn.pieces):
            synthesis = await self.speech.synthesize(piece, voice=self.voice, seed=self.seed)
            syntheses.append(synthesis)
            length += synthesis.audio.num_samples
            if index < len(turn.pauses_seconds):
                length += int(round(turn.pauses_seconds[index] * CANONICAL_SAMPLE_RATE_HZ))
            if length > cap:
                break
        for synthesis in syntheses:
            self._spent(synthesis)
        said = len(syntheses)
        clean, pauses = join_with_pauses([s.audio for s in syntheses],
                                         turn.pauses_seconds[:said - 1], max_samples=cap + 1)
        first = syntheses[0]
        info = {"provider": first.provider, "voice": first.voice,
                "cached": all(s.cached for s in syntheses),
                "cache": first.metadata.get("cache", "none")}
        prepared = Prepared(clean, info, None, pauses=pauses).cut(cap)
        return replace(prepared, bounds=speech_bounds(prepared.clean),
                       truncated=prepared.truncated or said < len(turn.pieces))

    def _spent(self, synthesis: Synthesis) -> None:
        """What a synthesis spent, recorded when it is made (a turn synthesized ahead and never
        spoken was paid for too; a cache hit spent nothing)."""
        for usage in synthesis.usage:
            self.recording.record_usage(usage, source="speech")
