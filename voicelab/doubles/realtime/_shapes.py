"""The JSON the local realtime server exchanges: the events it sends, the function calls its
"model" makes and the usage a ``response.done`` reports (OpenAI's Realtime API shapes)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from pydantic import JsonValue

from .._json import JsonObject

__all__ = ["JsonObject", "RealtimeUsage", "ServerEvent", "ToolCall"]

#: an event the server sends (serialized as it is)
ServerEvent = dict[str, object]


class ToolCall(TypedDict):
    """A function call the "model" makes instead of speaking."""

    name: str
    arguments: NotRequired[JsonValue]


class _CachedTokens(TypedDict):
    text_tokens: int
    audio_tokens: int


class _InputTokens(TypedDict):
    text_tokens: int
    audio_tokens: int
    cached_tokens: int
    cached_tokens_details: _CachedTokens


class _OutputTokens(TypedDict):
    text_tokens: int
    audio_tokens: int


class RealtimeUsage(TypedDict):
    """A ``response.done``'s ``usage``, as OpenAI's Realtime API reports it."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    input_token_details: _InputTokens
    output_token_details: _OutputTokens
