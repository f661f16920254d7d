"""The realtime persona (``persona_mode: realtime``): the simulated user is a speech-to-speech
model in one Voice Live (or OpenAI / Azure OpenAI Realtime) session per trial.

The product's audio is appended to the persona's input buffer, committed, and a response is
requested; the persona's spoken audio and its transcript become the next user turn. The
evaluator owns append, commit and response boundaries (``turn_detection`` is null). The persona
ends the conversation by calling the ``end_conversation`` function it is given, or by saying the
configured ``end_phrase``: a turn that also speaks is still played, and the next ``reply``
returns ``PersonaEnd("persona_ended")``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..audio import CANONICAL_FORMAT, CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ..cost import realtime_usage
from ..endpoints import EndpointError
from ..endpoints.realtime import Closure, RealtimeConnection, wire
from ..errors import ExecutionError
from ..speech import normalized_words, parse_realtime_settings, provider_voice
from ._protocol import PersonaContext, PersonaDecision, PersonaEnd, ProductResponse, UserTurn

logger = logging.getLogger(__name__)

END_TOOL = "end_conversation"
END_TOOL_SPEC = {
    "type": "function", "name": END_TOOL,
    "description": "End the call. Use it once your goals are met or the conversation cannot "
                   "usefully continue.",
    "parameters": {"type": "object",
                   "properties": {"reason": {"type": "string",
                                             "description": "why the conversation ends"}},
                   "required": []},
}


class RealtimePersonaError(ExecutionError):
    """The persona's realtime session failed mid-trial."""


class RealtimePersonaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["voice_live", "openai", "azure_openai"] | None = None
    model: str | None = None
    voice: str | None = None
    temperature: float | None = None
    end_phrase: str | None = None
    uri: str | None = None
    api_version: str | None = None
    instructions: str | None = None
    session: dict[str, Any] = Field(default_factory=dict)
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 15.0
    response_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024


def persona_instructions(context: PersonaContext, *, end_phrase: str | None = None,
                         extra: str | None = None) -> str:
    """The simulated user's system instructions: persona, scenario, run data, ending rule."""
    persona, scenario = context.persona, context.scenario
    lines = [f"You are {persona.name}, a person talking to a voice assistant on a call. You are "
             "the caller, never the assistant. Speak naturally, one turn at a time, and react to "
             "what the assistant just said.",
             f"Speak {persona.language}."]
    if persona.description:
        lines.append(f"About you: {persona.description}")
    traits = [f"{label}: {value}" for label, value in (
        ("experience level", persona.experience_level),
        ("communication style", persona.communication_style),
        ("specialization", persona.specialization)) if value]
    if traits:
        lines.append("Traits: " + "; ".join(traits) + ".")
    if persona.goals:
        lines.append("Your goals, in order: " + " ".join(
            f"({i}) {goal}" for i, goal in enumerate(persona.goals, 1)))
    behaviour = persona.session_behavior
    rules = []
    if behaviour.conclude_quickly:
        rules.append("wrap up as soon as your goals are met")
    if behaviour.decline_extras:
        rules.append("politely decline offers beyond your goals")
    rules.append(f"your patience is {behaviour.patience}")
    lines.append("Behaviour: " + "; ".join(rules) + ".")
    if scenario.description:
        lines.append(f"Situation: {scenario.description}")
    if scenario.expected_topics:
        lines.append("Topics you may bring up: " + ", ".join(scenario.expected_topics) + ".")
    if context.data:
        lines.append("Facts you know (JSON): " + json.dumps(dict(context.data), default=str,
                                                            sort_keys=True))
    ending = f"When the conversation is finished, say goodbye and call {END_TOOL}."
    if end_phrase:
        ending += f" Alternatively say exactly \"{end_phrase}\"."
    lines.append(ending)
    if extra:
        lines.append(extra)
    return "\n".join(lines)


@dataclass
class _Reply:
    audio: bytes = b""
    transcript: str = ""
    status: str = "completed"
    end_calls: list[dict[str, Any]] = field(default_factory=list)
    response_id: str | None = None


class RealtimePersona:
    """One realtime session per trial plays the user; see the module docstring."""

    def __init__(self, settings: Mapping[str, Any], context: PersonaContext):
        self._settings, self._target = parse_realtime_settings(
            RealtimePersonaSettings, settings, context, key="persona_settings")
        self._context = context
        self._scrubber = context.scrubber.with_values(self._target.secrets())
        self._instructions = persona_instructions(context, end_phrase=self._settings.end_phrase,
                                                  extra=self._settings.instructions)
        self._conn: RealtimeConnection | None = None
        self._start_ns = time.perf_counter_ns()
        self._events: list[dict[str, Any]] = []
        self._turns: list[dict[str, Any]] = []
        self._ending: str | None = None  # set once the persona decided to end

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any], context: PersonaContext) -> None:
        parse_realtime_settings(RealtimePersonaSettings, settings, context, key="persona_settings")

    @property
    def instructions(self) -> str:
        return self._instructions

    def session_config(self) -> dict[str, Any]:
        settings = self._settings
        session: dict[str, Any] = {"instructions": self._instructions, "tools": [END_TOOL_SPEC],
                                   "tool_choice": "auto"}
        voice = settings.voice or provider_voice(self._context.providers, self._target)
        if voice:
            session["voice"] = wire.voice_param(self._target.dialect, voice)
        if settings.temperature is not None:
            session["temperature"] = settings.temperature
        session.update(settings.session)
        return wire.build_session(self._target.session_format, session)

    # --- session plumbing ----------------------------------------------------------------

    def _record(self, direction: str, message: Mapping[str, Any]) -> None:
        self._events.append({"direction": direction,
                             "offset_ms": round((time.perf_counter_ns() - self._start_ns) / 1e6, 3),
                             "event": self._scrubber.scrub(wire.elide_audio(message))})

    async def _send(self, event: Mapping[str, Any]) -> None:
        if self._conn is None:
            raise RealtimePersonaError("the realtime persona session is not started")
        self._record("sent", event)
        try:
            await self._conn.send(event)
        except ExecutionError as error:
            raise RealtimePersonaError(self._scrubber.scrub_text(
                f"the realtime persona session dropped mid-trial: {error}")) from None

    async def _next(self, timeout_seconds: float, waiting_for: str) -> dict[str, Any]:
        assert self._conn is not None
        try:
            _, message = await self._conn.next(timeout_seconds)
        except TimeoutError:
            raise RealtimePersonaError(f"the realtime persona ({self._conn.where}) sent nothing "
                                       f"for {timeout_seconds:g} s while {waiting_for}") from None
        if isinstance(message, Closure):
            self._record("received", {"type": "voicelab.closed", "code": message.code,
                                      "reason": message.reason})
            raise RealtimePersonaError(self._scrubber.scrub_text(
                f"the realtime persona session ({self._conn.where}) dropped mid-trial while "
                f"{waiting_for} (code {message.code}: {message.reason or 'no reason given'})"))
        self._record("received", message)
        if wire.kind_of(message) == "error":
            code, text = wire.error_detail(message)
            raise RealtimePersonaError(self._scrubber.scrub_text(
                f"the realtime persona session reported an error while {waiting_for}: "
                f"{code}: {text}"))
        return message

    async def start(self) -> None:
        """Open the session and configure it (instructions, voice, end tool, no server VAD)."""
        settings = self._settings
        self._start_ns = time.perf_counter_ns()
        try:
            headers = await self._target.headers()
            self._scrubber = self._scrubber.with_values(self._target.credential_values(headers))
            self._conn = await RealtimeConnection.open(
                self._target.url, headers=headers,
                connect_timeout_seconds=settings.connect_timeout_seconds,
                max_message_bytes=settings.max_message_bytes, scrubber=self._scrubber,
                clock_ns=time.perf_counter_ns)
        except EndpointError as error:  # the persona's service, not the product, failed
            raise RealtimePersonaError(f"the realtime persona session could not start "
                                       f"({error.code}): {error}") from None
        await self._send(wire.session_update(self.session_config()))
        deadline = time.monotonic() + settings.connect_timeout_seconds
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            message = await self._next(remaining, "waiting for session.updated")
            if wire.kind_of(message) == "session_updated":
                return

    async def _respond(self) -> _Reply:
        """``response.create`` and everything until its ``response.done``."""
        await self._send(wire.response_create())
        reply = _Reply()
        chunks: list[bytes] = []
        end_call_ids: set[Any] = set()
        deadline = time.monotonic() + self._settings.response_timeout_seconds
        while True:
            message = await self._next(max(0.0, deadline - time.monotonic()),
                                       "waiting for the persona's reply")
            kind = wire.kind_of(message)
            if kind == "response_created":
                reply.response_id = (message.get("response") or {}).get("id")
            elif kind == "audio_delta":
                try:
                    chunks.append(wire.decode_audio(message))
                except ValueError as error:
                    raise RealtimePersonaError(f"the realtime persona sent unusable audio: "
                                               f"{error}") from None
            elif kind == "transcript_done":
                reply.transcript = str(message.get("transcript") or "")
            elif kind == "output_item_added":  # names the function (beta `done` events don't)
                item = message.get("item") or {}
                if item.get("type") == "function_call" and item.get("name") == END_TOOL:
                    end_call_ids.add(item.get("call_id"))
            elif kind == "function_call_done" and (message.get("name") == END_TOOL
                                                   or message.get("call_id") in end_call_ids):
                reply.end_calls.append({"call_id": message.get("call_id"),
                                        "arguments": message.get("arguments")})
            elif kind == "response_done":
                response = message.get("response") or {}
                reply.status = str(response.get("status") or "completed")
                audio_bytes = sum(len(chunk) for chunk in chunks)
                self._context.record_usage(realtime_usage(
                    response.get("usage"), component="persona", provider=self._target.dialect,
                    model=self._target.model, output_text=reply.transcript,
                    output_audio_seconds=CANONICAL_FORMAT.seconds_for_bytes(audio_bytes),
                    purpose=f"response {reply.response_id}" if reply.response_id else None))
                if reply.status == "failed":
                    raise RealtimePersonaError(self._scrubber.scrub_text(
                        f"the realtime persona's response failed: "
                        f"{response.get('status_details')}"))
                reply.audio = b"".join(chunks)
                return reply

    def _decide(self, reply: _Reply, response_index: int | None) -> PersonaDecision:
        said_end_phrase = bool(self._settings.end_phrase) and _contains_phrase(
            reply.transcript, self._settings.end_phrase or "")
        ending = ("end_conversation" if reply.end_calls
                  else "end_phrase" if said_end_phrase else None)
        self._turns.append({"product_response": response_index, "transcript": reply.transcript,
                            "audio_bytes": len(reply.audio), "status": reply.status,
                            "ending": ending})
        if ending and not reply.audio:
            return PersonaEnd("persona_ended", message=f"the realtime persona ended the "
                              f"conversation ({ending})")
        if ending:
            self._ending = ending
        if not reply.audio:
            raise RealtimePersonaError(f"the realtime persona's response ({reply.status}) held "
                                       f"no audio")
        return UserTurn(text=reply.transcript, audio=PcmAudio.from_bytes(reply.audio),
                        source="realtime",
                        metadata={"response_id": reply.response_id, "ending": ending})

    def _ended(self) -> PersonaEnd | None:
        if self._ending is None:
            return None
        return PersonaEnd("persona_ended", message=f"the realtime persona ended the "
                          f"conversation ({self._ending}) after its last turn")

    # --- the Persona protocol ------------------------------------------------------------

    async def opening(self) -> PersonaDecision:
        return self._decide(await self._respond(), None)

    def barge_in(self, response: ProductResponse) -> UserTurn | None:
        return None

    def confirm_barge_in(self, turn: UserTurn) -> None:
        return None

    async def reply(self, response: ProductResponse) -> PersonaDecision:
        ended = self._ended()
        if ended is not None:
            return ended
        audio = response.audio
        if audio is not None and audio.num_samples:
            audio = _canonical(audio)
            for frame in audio.chunks(self._settings.chunk_ms):
                await self._send(wire.append_audio(frame.to_bytes()))
            await self._send(wire.commit())
        else:
            text = response.transcript.strip() or "(The assistant did not say anything.)"
            await self._send(wire.user_text_item(text))
        return self._decide(await self._respond(), response.index)

    def evidence(self) -> dict[str, Any]:
        """Instructions, turns and the session's events (scrubbed, audio as byte counts)."""
        return {"mode": "realtime", "provider": self._target.dialect,
                "url": self._scrubber.scrub_text(self._target.where),
                "session_format": self._target.session_format,
                "instructions": self._scrubber.scrub_text(self._instructions),
                "turns": list(self._turns), "events": list(self._events)}

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close("trial finished")


def _canonical(audio: PcmAudio) -> PcmAudio:
    if audio.sample_rate_hz == CANONICAL_SAMPLE_RATE_HZ:
        return audio
    import numpy as np
    import soxr

    resampled = soxr.resample(audio.samples.astype(np.float32) / 32768.0, audio.sample_rate_hz,
                              CANONICAL_SAMPLE_RATE_HZ, quality="HQ")
    return PcmAudio(np.clip(np.round(resampled * 32767.0), -32768, 32767).astype(np.int16))


def _contains_phrase(transcript: str, phrase: str) -> bool:
    want, got = normalized_words(phrase), normalized_words(transcript)
    if not want:
        return False
    return any(got[i:i + len(want)] == want for i in range(len(got) - len(want) + 1))
