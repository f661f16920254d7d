"""A user turn as the conversation prepares it: its name (``turn-NNN``), whether it is a key
barge-in, its audio made ready (by :mod:`._user_speech`), its start recorded (speech synthesized,
environment mixed, turn started) and its keys pressed after its speech. It is a base of
:class:`~._conversation.Conversation`, kept apart from the loop, which decides when a turn is said
and sends its audio, and reaches this only through ``_turn_id``, ``_warm_up``, ``_prepare``,
``_prepare_soon``, ``_record_turn`` and ``_press``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ExecutionError
from ..personas import UserTurn
from ..recording import EnvironmentMixed, EventType, SpeechSynthesized, UserDtmf, UserTurnStarted
from ._conversation_end import ConversationEnd, ConversationEnded, Failure
from ._user_speech import Prepared, TurnSpeech


def is_key_barge_in(turn: UserTurn) -> bool:
    """``turn`` presses keys into the product's speech and says nothing (a key barge-in:
    docs/ivr.md); validation refuses speech on such a turn."""
    return bool(turn.dtmf) and turn.interrupt_after_seconds is not None \
        and turn.audio is None and not turn.text.strip()


def _turn_id(number: int) -> str:
    """``turn-000`` is the product's opening, ``turn-NNN`` the user's N-th turn."""
    return f"turn-{number:03d}"


class UserTurns(ConversationEnd):
    """A conversation's user turns made ready and recorded (see the module docstring)."""

    turn_speech: TurnSpeech

    async def _warm_up(self) -> None:
        await self.turn_speech.warm_up(self.persona)

    def _prepare_soon(self, turn: UserTurn) -> asyncio.Task[Prepared]:
        """Start preparing ``turn`` now (a barge-in is decided long before it is spoken)."""
        return self.turn_speech.soon(turn)

    async def _prepare(self, turn: UserTurn) -> Prepared:
        try:
            return await self._prepare_soon(turn)
        except ExecutionError as error:
            raise ConversationEnded("error", Failure("speech", self._scrub(str(error)))) from None
        except Exception as error:  # noqa: BLE001 - a provider bug is a speech failure
            raise ConversationEnded("error", Failure("speech", self._scrub(
                f"{type(error).__name__}: {error}"))) from None

    def _record_turn(self, turn: UserTurn, prepared: Prepared, *, turn_id: str,
                     mix_summary: dict[str, Any], barge_in_of: str | None) -> None:
        """speech.synthesized, environment.mixed and user.turn_started of a turn about to be
        spoken; the turn's speech bounds (from its clean audio) say where its speech starts and
        ends in what is sent."""
        recording = self.recording
        clean = prepared.clean
        recording.record(EventType.SPEECH_SYNTHESIZED, SpeechSynthesized(
            text=turn.text, duration_ms=round(clean.duration_seconds * 1000, 3),
            **prepared.info), source="speech", direction="internal", turn_id=turn_id,
            speaker_role="user", audio=clean.to_bytes())
        recording.record(EventType.ENVIRONMENT_MIXED, EnvironmentMixed(**mix_summary),
                         source="environment", direction="internal", turn_id=turn_id)
        bounds = prepared.bounds
        optional: dict[str, Any] = {"kind": turn.kind} if turn.kind != "speech" else {}
        if prepared.pauses:
            optional["pauses"] = [list(span) for span in prepared.pauses]
        recording.record(EventType.USER_TURN_STARTED, UserTurnStarted(
            text=turn.text, source_kind=turn.source, barge_in_of=barge_in_of, dtmf=turn.dtmf,
            speech_start_sample=bounds.start_sample if bounds else None,
            speech_end_sample=bounds.end_sample if bounds else None, **optional,
            **{k: v for k, v in turn.metadata.items() if isinstance(k, str)}),
            source="persona", direction="outbound", turn_id=turn_id, speaker_role="user")

    async def _press(self, turn: UserTurn, turn_id: str) -> None:
        """The turn's DTMF keys, after its speech (validation made sure the adapter has
        ``send_dtmf``)."""
        if not turn.dtmf:
            return
        await self.endpoint.send_dtmf(turn.dtmf)
        self.recording.record(EventType.USER_DTMF, UserDtmf(digits=turn.dtmf),
                              source="evaluator", direction="outbound", turn_id=turn_id,
                              speaker_role="user")
