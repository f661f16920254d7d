"""What the embedded fake product says and how it misbehaves: settings, reply plans, reply audio.

The fake plays the seed's workload-neutral example: it opens by asking for the daily plan and the
reminder, answers the user's turn by recording the plan and saving the reminder (a
``save_reminder`` tool call and its result), confirms, and completes the conversation. Every
fault a test needs is a setting here (documented in ``docs/protocol.md``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from ...audio import PCM16_MAX, PCM16_MIN, SILENCE_THRESHOLD, PcmAudio, tone_speech
from ...endpoints._settings import AdapterSettings
from .._voice import VoiceKind

DEFAULT_OPENING = "Hello! Tell me your daily plan and the reminder you want saved."
DEFAULT_REPLY = "Your daily plan is recorded and the reminder is saved for {reminder_time}."
DEFAULT_INTERIM_REPLY = "Noted. What else belongs in your daily plan?"
DEFAULT_REMINDER_TIME = "16:00"
DEFAULT_REMINDER_TEXT = "Follow up on the daily plan"
DEFAULT_TOPIC = "daily planning"

_TIME = re.compile(r"\b([01]?\d|2[0-3])[:.h]([0-5]\d)\b")
_AT_TIME = re.compile(r"\s*(?:\bat\b\s*)?\b([01]?\d|2[0-3])[:.h]([0-5]\d)\b\.?", re.IGNORECASE)

NonNegativeMs = Annotated[float, Field(ge=0)]
ResponseNumber = Annotated[int, Field(ge=1)]


class FakeBehaviour(AdapterSettings):
    """The fake product's replies and faults. Responses are numbered from 1 in the order the
    fake starts them; the opening (when there is one) is response 1."""

    opening_text: str = DEFAULT_OPENING  # "" = no opening: the product waits for the user
    reply_text: str = DEFAULT_REPLY  # the completing turn's reply; {reminder_time} is filled in
    interim_reply_text: str = DEFAULT_INTERIM_REPLY  # user turns before the completing one
    replies: list[str] = Field(default_factory=list)  # per user turn, overrides the two above
    complete_after_turns: Annotated[int, Field(ge=0)] = 1  # 0 = never completes
    reminder_time: str = DEFAULT_REMINDER_TIME  # used when the init data names no time
    input_transcript: str | None = None  # reported after each commit when set
    voice_seed: int = 7
    audio_transport: Literal["binary", "base64"] = "binary"
    output_chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 40.0
    audio_pacing: Literal["burst", "realtime"] = "burst"
    pacing_speed: Annotated[float, Field(gt=0)] = 1.0  # realtime pacing sped up by this factor
    reply_latency_ms: NonNegativeMs | list[NonNegativeMs] = 0.0  # list: per response number
    stall_ms: NonNegativeMs = 0.0
    stall_after_seconds: NonNegativeMs = 0.5  # of response audio sent before the stall
    stall_on_response: ResponseNumber | None = None  # None = every response
    silence_ms: NonNegativeMs = 0.0  # digital silence inserted mid-reply
    clip: bool = False  # saturate reply audio
    truncate: bool = False  # cut reply audio mid-word (its last 10 ms are loud)
    ignore_cancel: bool = False
    error_on_response: ResponseNumber | None = None
    error_message: str = "injected error on response {number}"  # what that error says
    close_mid_response: ResponseNumber | None = None
    never_answer: bool = False
    claim_without_tool: bool = False  # says "saved" but calls no tool and persists nothing
    access_token: str | None = None  # when set, the handshake needs "Authorization: Bearer <it>"
    database_path: str | None = None  # SQLite file; default: a fresh temporary directory
    max_client_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    #: a hostile product: ``event_storm`` sends messages of an unknown type (1 kB each) as fast
    #: as the socket takes them once the session starts, and never answers
    hostile: Literal["event_storm"] | None = None
    # --- listening (turn_taking: server_vad) ---
    #: client: the evaluator commits each turn; server_vad: the fake detects the end of the
    #: user's speech itself on the live line (and replies in real time); ``turn_detection``,
    #: the older spelling, is read too
    turn_taking: Literal["client", "server_vad"] = "client"
    vad_silence_ms: Annotated[float, Field(gt=0)] = 500.0  # silence that ends a user's turn
    #: server_vad: stop replying once the user has spoken this long over the reply
    #: (0: stops on any sound; null: never stops, like a product without barge-in)
    stop_on_speech_ms: NonNegativeMs | None = 150.0
    #: server_vad: an utterance with less speech than this is no turn (no reply): a product
    #: that lets "mm-hmm" pass (0: every utterance is answered)
    min_turn_ms: NonNegativeMs = 0.0
    #: server_vad: suppress its own voice coming back on the line (a Geigel double-talk
    #: detector: an incoming frame whose peak is under ``echo_gate_ratio`` times the peak of
    #: what it sent within ``echo_tail_ms`` is its echo, and silence to its ear)
    echo_cancellation: bool = False
    echo_tail_ms: Annotated[float, Field(gt=0, le=5000)] = 1000.0
    echo_gate_ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    leading_silence_ms: NonNegativeMs = 0.0  # digital silence before each reply's speech
    idle_silence: bool = False  # stream silence frames whenever not replying (a phone line)
    transcripts: bool = True  # false: the product speaks but never says what (no transcripts)
    #: response.done's server_timing lists when each audio frame was sent (frame_sent_ns, on
    #: the shared monotonic clock): the truth benchmarks rebuild a listener's timings from
    report_frame_times: bool = False
    # --- what it hears and says (the entity checks' faults) ---
    #: ``tone`` (instant, no words) or ``piper`` (real words a recognizer reads back,
    #: ``voicelab[speech]``; synthesized off the event loop, so a reply starts later)
    voice: VoiceKind = "tone"
    #: mishears: its input transcript has the last two digits swapped ("4471" -> "4417")
    mishear_digits: bool = False
    #: misspeaks: its audio says its text with the last two digits swapped, while its
    #: transcript and tool calls keep the text
    misspeak_digits: bool = False

    def latency_seconds(self, response_number: int) -> float:
        latency = self.reply_latency_ms
        if isinstance(latency, list):
            latency = latency[response_number - 1] if response_number <= len(latency) else 0.0
        return latency / 1000.0

    def stalls_on(self, response_number: int) -> bool:
        return self.stall_ms > 0 and self.stall_on_response in (None, response_number)


@dataclass(frozen=True)
class Reminder:
    text: str
    time: str


def reminder_from_request(request: Mapping[str, object], *, fallback_time: str) -> Reminder:
    """The reminder asked for in the opaque init data (``requested_reminder``, top level or under
    ``context``), e.g. "Submit the weekly summary at 16:00" -> ("Submit the weekly summary",
    "16:00")."""
    requested = request.get("requested_reminder")
    context = request.get("context")
    if requested is None and isinstance(context, Mapping):
        requested = context.get("requested_reminder")
    if not isinstance(requested, str) or not requested.strip():
        return Reminder(DEFAULT_REMINDER_TEXT, fallback_time)
    match = _TIME.search(requested)
    time = f"{int(match.group(1)):02d}:{match.group(2)}" if match else fallback_time
    text = _AT_TIME.sub("", requested).strip(" .,") or DEFAULT_REMINDER_TEXT
    return Reminder(text, time)


def topic_from_request(request: Mapping[str, object]) -> str:
    context = request.get("context")
    topic = request.get("topic")
    if topic is None and isinstance(context, Mapping):
        topic = context.get("topic")
    return topic if isinstance(topic, str) and topic.strip() else DEFAULT_TOPIC


@dataclass(frozen=True)
class ReplyPlan:
    """One response to a user turn: what to say, and whether to save the reminder and complete."""

    text: str
    saves_reminder: bool
    records_plan: bool
    completes: bool


def plan_reply(behaviour: FakeBehaviour, user_turn: int, reminder: Reminder) -> ReplyPlan:
    final_turn = behaviour.complete_after_turns or 1
    is_final = user_turn == final_turn
    if user_turn <= len(behaviour.replies):
        template = behaviour.replies[user_turn - 1]
    else:
        template = behaviour.reply_text if is_final else behaviour.interim_reply_text
    text = template.replace("{reminder_time}", reminder.time)
    honest = not behaviour.claim_without_tool
    return ReplyPlan(text=text, saves_reminder=is_final and honest, records_plan=honest,
                     completes=is_final and behaviour.complete_after_turns > 0)


def swap_last_digits(text: str) -> str:
    """``text`` with its last two digits swapped ("4471" -> "4417", "4 4 7 1" -> "4 4 1 7"):
    a mishearing or misspeaking of one number."""
    places = [index for index, char in enumerate(text) if char.isdigit()]
    if len(places) < 2:
        return text
    chars = list(text)
    a, b = places[-2], places[-1]
    chars[a], chars[b] = chars[b], chars[a]
    return "".join(chars)


def heard_transcript(behaviour: FakeBehaviour) -> str | None:
    """The input transcript the fake reports (its mishearing applied)."""
    heard = behaviour.input_transcript
    if heard is not None and behaviour.mishear_digits:
        return swap_last_digits(heard)
    return heard


def spoken_text(text: str, behaviour: FakeBehaviour) -> str:
    """What the fake's voice says for its reply ``text`` (its misspeaking applied)."""
    return swap_last_digits(text) if behaviour.misspeak_digits else text


def reply_audio(text: str, behaviour: FakeBehaviour, *, speech: PcmAudio | None = None
                ) -> PcmAudio:
    """The reply's speech (``speech``, else tone speech for ``text``) with the configured
    signal faults applied (leading silence, silence, clip, cut)."""
    audio = speech if speech is not None else tone_speech(text, seed=behaviour.voice_seed)
    samples = audio.samples
    rate = audio.sample_rate_hz
    if behaviour.leading_silence_ms > 0:
        lead = np.zeros(int(round(behaviour.leading_silence_ms * rate / 1000.0)), dtype=np.int16)
        samples = np.concatenate([lead, samples])
    if behaviour.silence_ms > 0 and samples.size:
        gap = np.zeros(int(round(behaviour.silence_ms * rate / 1000.0)), dtype=np.int16)
        middle = samples.size // 2
        samples = np.concatenate([samples[:middle], gap, samples[middle:]])
    if behaviour.clip:
        samples = np.clip(samples.astype(np.int32) * 4, PCM16_MIN, PCM16_MAX).astype(np.int16)
    if behaviour.truncate:
        loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > 2 * SILENCE_THRESHOLD)
        if loud.size:
            samples = samples[:int(loud[int(loud.size * 0.6)]) + 1]
    return PcmAudio(np.ascontiguousarray(samples), rate)


def speech_start_byte(audio: PcmAudio) -> int | None:
    """Where the speech starts in ``audio`` (bytes): its first sample above the silence
    threshold (tone speech is digital silence around its words)."""
    loud = np.flatnonzero(np.abs(audio.samples.astype(np.int32)) > SILENCE_THRESHOLD)
    return int(loud[0]) * 2 if loud.size else None


def audio_frames(audio: PcmAudio, chunk_ms: float) -> list[bytes]:
    return [chunk.to_bytes() for chunk in audio.chunks(chunk_ms)]
