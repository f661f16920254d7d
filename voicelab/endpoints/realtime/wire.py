"""The OpenAI Realtime / Azure Voice Live event protocol, shared by the realtime endpoint adapter,
the realtime persona and the ``voice_live`` speech provider.

It holds the event names (GA and beta / Voice Live spellings are both accepted), client-event
builders, the session shapes of both API generations, and URL and auth building for each
dialect. The connection itself is :class:`._realtime_connection.RealtimeConnection`. See
``docs/realtime.md`` for the mapping table.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

from pydantic import JsonValue

from ...audio import CANONICAL_SAMPLE_RATE_HZ
from ...errors import MissingDependencyError
from .. import EndpointError, field_mapping, redacted_url
from .._fields import JsonObject, json_object

logger = logging.getLogger(__name__)

Dialect = Literal["openai", "azure_openai", "voice_live"]
SessionFormat = Literal["ga", "beta"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
VOICE_LIVE_API_VERSION = "2025-10-01"
#: Entra ID scopes: Voice Live documents ai.azure.com; Azure OpenAI uses Cognitive Services.
TOKEN_SCOPES = {"voice_live": "https://ai.azure.com/.default",
                "azure_openai": "https://cognitiveservices.azure.com/.default"}
CLOSE_TIMEOUT_SECONDS = 2.0
USER_AGENT = "voicelab-evaluator (realtime)"

# Server event type -> the canonical kind every consumer switches on (both spellings).
_KINDS = {
    "response.output_audio.delta": "audio_delta", "response.audio.delta": "audio_delta",
    "response.output_audio_transcript.done": "transcript_done",
    "response.audio_transcript.done": "transcript_done",
    "response.output_text.done": "text_done", "response.text.done": "text_done",
    "conversation.item.input_audio_transcription.completed": "input_transcript",
    "response.function_call_arguments.done": "function_call_done",
    "response.output_item.added": "output_item_added",
    "response.created": "response_created", "response.done": "response_done",
    "session.created": "session_created", "session.updated": "session_updated",
    "output_audio_buffer.cleared": "audio_buffer_cleared",
    "error": "error",
}
MALFORMED = "voicelab.malformed"  # the type given to a frame that was not a JSON object


def kind_of(message: Mapping[str, object]) -> str:
    """The canonical kind of one server event (``other`` when voicelab does not interpret it)."""
    kind = message.get("type")
    if kind == MALFORMED:
        return "malformed"
    return _KINDS.get(kind, "other") if isinstance(kind, str) else "other"


# --- client events --------------------------------------------------------------------------

def session_update(session: Mapping[str, object]) -> JsonObject:
    return {"type": "session.update", "session": json_object(session, what="the session")}


def append_audio(pcm: bytes) -> JsonObject:
    return {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode("ascii")}


def commit() -> JsonObject:
    return {"type": "input_audio_buffer.commit"}


def response_create(response: Mapping[str, object] | None = None) -> JsonObject:
    event: JsonObject = {"type": "response.create"}
    if response:
        event["response"] = json_object(response, what="the response parameters")
    return event


def response_cancel() -> JsonObject:
    return {"type": "response.cancel"}


def function_call_output(call_id: str, output: object) -> JsonObject:
    text = output if isinstance(output, str) else json.dumps(output, default=str)
    return {"type": "conversation.item.create",
            "item": {"type": "function_call_output", "call_id": call_id, "output": text}}


def user_text_item(text: str) -> JsonObject:
    return {"type": "conversation.item.create",
            "item": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": text}]}}


def voice_param(dialect: Dialect, voice: str | None) -> str | dict[str, str] | None:
    """The session/response ``voice`` value: Voice Live takes an object naming the voice family
    (an Azure neural voice like ``en-US-AvaNeural`` is ``azure-standard``); OpenAI a plain name."""
    if not voice or dialect != "voice_live":
        return voice or None
    return {"name": voice, "type": "azure-standard" if "-" in voice else "openai"}


def audio_response_params(session_format: SessionFormat, *, voice: object = None,
                          **extra: object) -> dict[str, object]:
    """``response.create`` parameters asking for spoken output (and an optional voice)."""
    params: dict[str, object] = dict(extra)
    if session_format == "ga":
        params["output_modalities"] = ["audio"]
        if voice:
            params["audio"] = {"output": {"voice": voice}}
    else:
        params["modalities"] = ["audio", "text"]
        if voice:
            params["voice"] = voice
    return params


# --- session shapes -------------------------------------------------------------------------

_PCM_GA: JsonObject = {"type": "audio/pcm", "rate": CANONICAL_SAMPLE_RATE_HZ}
# Flat (beta-style) keys and where the GA session keeps them.
_GA_PATHS = {
    "voice": ("audio", "output", "voice"),
    "input_audio_transcription": ("audio", "input", "transcription"),
    "turn_detection": ("audio", "input", "turn_detection"),
    "input_audio_noise_reduction": ("audio", "input", "noise_reduction"),
    "max_response_output_tokens": ("max_output_tokens",),
}
_GA_DROPPED = frozenset({"modalities", "input_audio_format", "output_audio_format",
                         "temperature"})


def _deep_merge(base: dict[str, object], overlay: Mapping[str, object]) -> dict[str, object]:
    for key, value in overlay.items():
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _deep_merge(current, value)
        else:
            base[key] = value
    return base


def build_session(session_format: SessionFormat, settings: Mapping[str, object]
                  ) -> dict[str, object]:
    """A ``session.update`` session: pcm16 24 kHz both ways, ``turn_detection`` null (the
    evaluator controls turn boundaries) unless ``settings`` says otherwise.

    ``settings`` may use the flat keys of the beta / Voice Live session (``voice``,
    ``input_audio_transcription``, ``turn_detection``...); for a GA session they move to their
    nested GA place, and any GA-shaped key passes through unchanged.
    """
    if session_format == "beta":
        base: dict[str, object] = {"modalities": ["text", "audio"], "input_audio_format": "pcm16",
                                "output_audio_format": "pcm16", "turn_detection": None}
        return _deep_merge(base, settings)
    base = {"type": "realtime", "output_modalities": ["audio"],
            "audio": {"input": {"format": dict(_PCM_GA), "turn_detection": None},
                      "output": {"format": dict(_PCM_GA)}}}
    for key, value in settings.items():
        if key in _GA_PATHS:
            *parents, leaf = _GA_PATHS[key]
            _nested(base, parents)[leaf] = value
        elif key in _GA_DROPPED:
            logger.debug("session key %r has no GA equivalent; not sent", key)
        elif isinstance(value, Mapping) and isinstance(current := base.get(key), dict):
            _deep_merge(current, value)
        else:
            base[key] = value
    return base


def _nested(node: dict[str, object], parents: list[str]) -> dict[str, object]:
    """The object at ``parents`` under ``node``, made where missing (a settings value that is
    not an object there is replaced: the GA place of a flat key is an object)."""
    for parent in parents:
        child = node.get(parent)
        if isinstance(child, dict):
            node = child
        else:
            node[parent] = node = {}
    return node


# --- audio in events ------------------------------------------------------------------------

def decode_audio(message: Mapping[str, object]) -> bytes:
    """The PCM of an audio delta; ``ValueError`` for missing/invalid base64 or half samples."""
    encoded = message.get("delta")
    if not isinstance(encoded, str):
        raise ValueError("audio delta without a base64 'delta' string")
    audio = base64.b64decode(encoded, validate=True)
    if len(audio) % 2:
        raise ValueError(f"odd-length audio delta ({len(audio)} bytes); pcm16 needs whole samples")
    return audio


def _base64_byte_count(encoded: str) -> int:
    return max(0, len(encoded) * 3 // 4 - encoded[-2:].count("="))


def elide_audio(message: Mapping[str, JsonValue]) -> JsonObject:
    """A copy with base64 audio replaced by its byte count (kept records never hold PCM)."""
    copy = dict(message)
    for key in ("delta", "audio"):
        value = copy.get(key)
        if key == "delta" and kind_of(message) != "audio_delta":
            continue
        if isinstance(value, str):
            copy[key] = {"omitted": "base64 pcm", "byte_count": _base64_byte_count(value)}
    return copy


def error_detail(message: Mapping[str, object]) -> tuple[str, str]:
    """``(code, message)`` of an ``error`` event."""
    detail = field_mapping(message, "error")
    code = str(detail.get("code") or detail.get("type") or "realtime_error")
    return code, str(detail.get("message") or code)


# --- where to connect and how to authenticate -----------------------------------------------

def websocket_base(endpoint: str) -> str:
    """``endpoint`` with an http(s) scheme turned into ws(s) (ws/wss kept), no trailing slash."""
    parts = urlsplit(endpoint.strip())
    scheme = {"https": "wss", "http": "ws", "wss": "wss", "ws": "ws"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise ValueError(f"endpoint must be an http(s) or ws(s) URL, got scheme "
                         f"{parts.scheme or 'none'!r}")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def realtime_url(dialect: Dialect, *, endpoint: str | None, model: str | None,
                 api_version: str | None = None) -> str:
    """The documented WebSocket URL of each dialect (``model`` is the deployment on Azure)."""
    if not model:
        raise ValueError(f"dialect {dialect!r} needs a model (or deployment) name")
    if dialect == "openai":
        base = websocket_base(endpoint or OPENAI_BASE_URL)
        return f"{base}/realtime?{urlencode({'model': model})}"
    if not endpoint:
        raise ValueError(f"dialect {dialect!r} needs an endpoint")
    base = websocket_base(endpoint)
    if dialect == "voice_live":
        query = {"api-version": api_version or VOICE_LIVE_API_VERSION, "model": model}
        return f"{base}/voice-live/realtime?{urlencode(query)}"
    if api_version:  # the preview endpoint speaks the beta protocol
        return f"{base}/openai/realtime?{urlencode({'api-version': api_version, 'deployment': model})}"
    return f"{base}/openai/v1/realtime?{urlencode({'model': model})}"


def default_session_format(dialect: Dialect, *, api_version: str | None = None,
                           uri: str | None = None) -> SessionFormat:
    if dialect == "voice_live":
        return "beta"
    if dialect == "azure_openai" and (api_version or (uri and "api-version=" in uri)):
        return "beta"
    return "ga"


def require_azure_identity(*, purpose: str, key: str | None = None) -> None:
    import importlib.util

    if importlib.util.find_spec("azure.identity") is None:
        raise MissingDependencyError("azure-identity", extra="azure", purpose=purpose, key=key)


async def entra_token(scope: str) -> str:
    """An Entra ID access token from ``DefaultAzureCredential`` (run in a worker thread)."""
    require_azure_identity(purpose="Entra ID auth (auth: default_credential)")
    from azure.identity import DefaultAzureCredential

    def fetch() -> str:
        credential = DefaultAzureCredential()
        try:
            return credential.get_token(scope).token
        finally:
            credential.close()

    return await asyncio.to_thread(fetch)


@dataclass(frozen=True)
class RealtimeTarget:
    """Where a realtime session connects, in which protocol generation, with which credential."""

    url: str
    dialect: Dialect
    session_format: SessionFormat
    api_key: str | None = None
    auth: Literal["api_key", "default_credential"] = "api_key"
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    #: the model (or Azure deployment) the session runs, as usage is priced by it
    model: str | None = None

    @property
    def where(self) -> str:
        return redacted_url(self.url)

    @staticmethod
    def credential_values(headers: Mapping[str, str]) -> list[str]:
        """Credentials inside built handshake headers (an Entra token is only known here)."""
        return [value for name, value in headers.items()
                if name.lower() in ("authorization", "api-key") and value]

    def secrets(self) -> list[str]:
        values = [v for v in self.extra_headers.values() if v]
        if self.api_key:
            values += [self.api_key, f"Bearer {self.api_key}"]
        return values

    async def headers(self, *, traceparent: str | None = None) -> dict[str, str]:
        """Handshake headers; fetches an Entra ID token for ``auth: default_credential``.

        OpenAI takes ``Authorization: Bearer <key>``; Azure OpenAI and Voice Live take an
        ``api-key`` header, or a Bearer Entra ID token.
        """
        headers = dict(self.extra_headers)
        if traceparent:
            headers["traceparent"] = traceparent
        if self.dialect == "openai" and self.session_format == "beta":
            headers["OpenAI-Beta"] = "realtime=v1"
        if self.auth == "default_credential" and self.dialect != "openai":
            try:
                token = await entra_token(TOKEN_SCOPES[self.dialect])
            except MissingDependencyError:
                raise
            except Exception as error:  # noqa: BLE001 - any credential failure is an auth failure
                raise EndpointError(f"DefaultAzureCredential could not get a token for "
                                    f"{self.where}: {type(error).__name__}",
                                    code="auth_failed") from None
            headers["Authorization"] = f"Bearer {token}"
        elif self.api_key:
            if self.dialect == "openai":
                headers["Authorization"] = f"Bearer {self.api_key}"
            else:
                headers["api-key"] = self.api_key
        return headers
