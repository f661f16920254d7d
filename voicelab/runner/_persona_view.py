"""What the persona is shown of the product: a response as a
:class:`~voicelab.personas.ProductResponse`, with its transcript, its tool calls and results, and
its audio as sent or as the user heard it through the ``to_user`` line. It is a base of
:class:`~._conversation.Conversation`, kept apart from the loop, which asks it only for
``_response_view`` (the latest response, for a reply) and ``_view_of`` (a response still playing,
for a barge-in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..audio import PcmAudio
from ..personas import ProductResponse
from ..recording import EventType, ProductTurn, Recording, ns_to_samples
from ._channel import ToUserLine
from ._heard_speech import HeardSpeech
from ._intake import Intake
from ._user_turn import _turn_id


class PersonaView:
    """The persona's view of the product's responses (see the module docstring)."""

    recording: Recording
    intake: Intake
    to_user_line: ToUserLine | None
    heard_speech: HeardSpeech | None
    user_turns: int

    def _heard_audio(self, response: ProductTurn
                     ) -> PcmAudio | Callable[[], PcmAudio]:
        """The response's audio: as sent (joined when the persona first reads it), or through
        the ``to_user`` line when there is one (what the user heard of it, up to now)."""
        if self.to_user_line is None or self.heard_speech is None:
            events, audio_of = list(response.audio), self.recording.audio_of
            return lambda: PcmAudio.from_bytes(b"".join(audio_of(e) for e in events))
        self.heard_speech.listen_until(self.recording.listener_now_ns())
        playback = self.recording.timeline.responses.get(response.turn_id)
        if playback is None or playback.start_ns is None or playback.end_ns is None:
            return PcmAudio.from_bytes(b"")
        return self.to_user_line.heard(ns_to_samples(playback.start_ns),
                                       ns_to_samples(playback.end_ns))

    def _response_view(self) -> ProductResponse:
        response = self.intake.current
        heard = self.intake.input_transcript(_turn_id(self.user_turns)) if self.user_turns \
            else None
        if response is None:
            return ProductResponse(index=-1, input_transcript=heard,
                                   conversation_complete=self.intake.conversation_complete)
        return ProductResponse(
            index=response.index, transcript=response.transcript,
            audio=self._heard_audio(response), tool_calls=self._calls(response),
            tool_results=[dict(e.attributes) for e in
                          response.of_type(EventType.PRODUCT_TOOL_RESULT)],
            input_transcript=heard, status=response.latest_status or "incomplete",
            conversation_complete=self.intake.conversation_complete,
            audio_seconds_played=response.audio_seconds)

    @staticmethod
    def _calls(response: ProductTurn) -> list[dict[str, Any]]:
        return [{**e.attributes, "turn_id": e.turn_id, "offset_ns": e.offset_ns}
                for e in response.events if e.type is EventType.PRODUCT_TOOL_CALL]

    def _view_of(self, response: ProductTurn) -> ProductResponse:
        return ProductResponse(index=response.index, transcript=response.transcript,
                               tool_calls=self._calls(response),
                               status=response.latest_status or "in_progress",
                               audio_seconds_played=response.audio_seconds)
