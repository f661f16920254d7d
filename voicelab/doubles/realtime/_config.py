"""What a test tells the local realtime server (:class:`RealtimeServerConfig`) and what the server
keeps for the test to assert on: each connection's client events (:class:`RealtimeConnectionRecord`)
and the usage its responses billed (:class:`RealtimeUsageCounts`). Its own module because the
server (:mod:`._server`) and each session (:mod:`._session`) both read these, and neither imports
the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ._shapes import JsonObject, RealtimeUsage, ToolCall


@dataclass
class RealtimeServerConfig:
    """Behaviour of the local realtime server (one instance per test)."""

    spelling: Literal["ga", "beta"] = "ga"
    api_key: str | None = None
    lines: list[str] = field(default_factory=lambda: ["Hello, how can I help you today?"])
    tool_calls: dict[int, ToolCall] = field(default_factory=dict)  # response no. -> call
    end_call_on_last_line: bool = False
    end_function: str = "end_conversation"
    input_transcript: str | None = None
    seed: int = 0
    chunk_ms: float = 100.0
    delta_delay_seconds: float = 0.0
    speak_instead: str | None = None
    reject_status: int | None = None
    error_on_response: int | None = None
    drop_on_response: int | None = None
    silent_from_response: int | None = None
    ignore_session_update: bool = False
    #: a hostile service: ``event_storm`` sends events of an unknown type as fast as the
    #: socket takes them once the session is created (not recorded)
    hostile: Literal["event_storm"] | None = None
    #: ``response.done`` carries ``usage`` (False: it is left out, as a service may)
    report_usage: bool = True



@dataclass
class RealtimeUsageCounts:
    """What the server billed over every session: each ``response.done``'s usage summed."""

    responses: int = 0
    text_in: int = 0
    cached_text_in: int = 0
    audio_in: int = 0
    cached_audio_in: int = 0
    text_out: int = 0
    audio_out: int = 0

    def add(self, usage: RealtimeUsage) -> None:
        inputs, outputs = usage["input_token_details"], usage["output_token_details"]
        cached = inputs["cached_tokens_details"]
        self.responses += 1
        self.text_in += inputs["text_tokens"]
        self.cached_text_in += cached["text_tokens"]
        self.audio_in += inputs["audio_tokens"]
        self.cached_audio_in += cached["audio_tokens"]
        self.text_out += outputs["text_tokens"]
        self.audio_out += outputs["audio_tokens"]


@dataclass
class RealtimeConnectionRecord:
    """What one client connection did, for assertions."""

    path: str
    query: dict[str, str]
    auth: str | None
    client_events: list[JsonObject] = field(default_factory=list)
    committed_audio: list[bytes] = field(default_factory=list)
    session: JsonObject = field(default_factory=dict)

    def events_of(self, event_type: str) -> list[JsonObject]:
        return [event for event in self.client_events if event.get("type") == event_type]
