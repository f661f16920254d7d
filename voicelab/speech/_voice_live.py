"""Exact-text speech through a Voice Live (or OpenAI / Azure OpenAI Realtime) session
(``speech_provider: voice_live``).

Two ways to make the service speak given text, most faithful first:

* ``pre_generated`` (Voice Live): ``response.create`` carrying a ``pre_generated_assistant_message``;
  the service synthesizes that assistant message as written, no model inference.
* ``instructed`` (OpenAI / Azure OpenAI, also accepted by Voice Live): an out-of-band response
  (``conversation: "none"``) whose only input is the text and whose instructions are to read it
  verbatim. A model may still paraphrase, so the result is verified.

Either way the service's transcript of what it spoke must equal the requested text after case,
punctuation and whitespace normalization; a mismatch raises :class:`SpeechMismatchError` naming
the difference instead of returning the wrong audio. One session is reused per provider instance.

This module also resolves the run's ``providers:`` block into a realtime target
(:func:`realtime_target`, :func:`parse_realtime_settings`, :func:`provider_voice`), which the
realtime persona shares.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import re
import time
import unicodedata
from collections.abc import Mapping
from typing import Annotated, Literal, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..artifacts import Usage
from ..audio import CANONICAL_FORMAT, PcmAudio
from ..config import (
    AzureOpenAIProvider,
    OpenAIProvider,
    Providers,
    SecretScrubber,
    VoiceLiveProvider,
    parse_settings,
)
from ..cost import realtime_usage
from ..endpoints import EndpointError, field_mapping
from ..endpoints.realtime import Closure, RealtimeConnection, wire
from ..errors import ConfigError, ExecutionError
from ._protocol import SpeechContext

logger = logging.getLogger(__name__)

ProviderName = Literal["voice_live", "openai", "azure_openai"]
SettingsModel = TypeVar("SettingsModel", bound=BaseModel)

READ_ALOUD_INSTRUCTIONS = (
    "You are a text-to-speech voice. Read the user's message aloud exactly as written, word for "
    "word, in its language. Do not answer it, add, drop, translate or reword anything, and say "
    "nothing else.")


class SpeechMismatchError(ExecutionError):
    """The service spoke something other than the requested text."""


# --- providers: -> realtime target (shared with the realtime persona) -----------------------

def realtime_target(providers: Providers, *, provider: ProviderName | None, model: str | None = None,
                    uri: str | None = None, api_version: str | None = None,
                    environ: Mapping[str, str] | None = None,
                    key: str = "persona_settings") -> wire.RealtimeTarget:
    """The realtime endpoint named by ``provider`` in the run's ``providers:`` block.

    Without ``provider`` the first configured of voice_live, azure_openai, openai is used. A
    missing block or credential is a :class:`ConfigError`; nothing touches the network.
    """
    environ = os.environ if environ is None else environ
    configured: dict[ProviderName, VoiceLiveProvider | AzureOpenAIProvider | OpenAIProvider
                     | None] = {"voice_live": providers.voice_live,
                                "azure_openai": providers.azure_openai,
                                "openai": providers.openai}
    if provider is None:
        provider = next((name for name, block in configured.items() if block is not None), None)
        if provider is None:
            raise ConfigError("a realtime session needs providers.voice_live, "
                              "providers.azure_openai or providers.openai", key="providers")
    config = configured[provider]
    if config is None:
        raise ConfigError(f"{key}.provider is {provider!r} but providers.{provider} is not "
                          f"configured", key=f"providers.{provider}")
    if isinstance(config, OpenAIProvider):
        api_key = config.api_key or environ.get("OPENAI_API_KEY")
        if not api_key:
            raise ConfigError("the OpenAI Realtime API needs providers.openai.api_key or "
                              "OPENAI_API_KEY", key="providers.openai.api_key")
        model = model or config.model
        url = uri or wire.realtime_url("openai", endpoint=config.base_url, model=model)
        return wire.RealtimeTarget(url=url, dialect="openai", session_format="ga",
                                   api_key=api_key, model=model)
    if config.auth == "api_key" and not config.api_key:
        raise ConfigError(f"providers.{provider}.auth is 'api_key' but no api_key is set",
                          key=f"providers.{provider}.api_key")
    if config.auth == "default_credential":
        wire.require_azure_identity(purpose=f"providers.{provider} auth 'default_credential'",
                                    key=f"providers.{provider}.auth")
    if provider == "voice_live":
        api_version = api_version or config.api_version
    model = model or config.model
    try:
        url = uri or wire.realtime_url(provider, endpoint=config.endpoint, model=model,
                                       api_version=api_version)
    except ValueError as error:
        raise ConfigError(str(error), key=f"providers.{provider}.endpoint") from None
    session_format = wire.default_session_format(provider, api_version=api_version, uri=uri)
    return wire.RealtimeTarget(url=url, dialect=provider, session_format=session_format,
                               api_key=config.api_key, auth=config.auth, model=model)


class RealtimeContext(Protocol):
    """What naming a realtime target reads of a persona's or a speech provider's context."""

    @property
    def providers(self) -> Providers: ...

    @property
    def environ(self) -> Mapping[str, str] | None: ...


class _RealtimeOptions(Protocol):
    """The fields every realtime settings model has."""

    @property
    def provider(self) -> ProviderName | None: ...

    @property
    def model(self) -> str | None: ...

    @property
    def uri(self) -> str | None: ...

    @property
    def api_version(self) -> str | None: ...


def parse_realtime_settings(model: type[SettingsModel], settings: Mapping[str, object] | None,
                            context: RealtimeContext, *, key: str
                            ) -> tuple[SettingsModel, wire.RealtimeTarget]:
    """``settings`` validated against ``model`` and the realtime target they name in
    ``context.providers`` (the model has ``provider``, ``model``, ``uri`` and ``api_version``).

    Either failure is one :class:`ConfigError`; a settings error is keyed ``<key>.<field>``.
    """
    parsed = parse_settings(model, settings, key=key)
    options = cast(_RealtimeOptions, parsed)  # the model has these fields (see above)
    target = realtime_target(context.providers, provider=options.provider, model=options.model,
                             uri=options.uri, api_version=options.api_version,
                             environ=context.environ, key=key)
    return parsed, target


def provider_voice(providers: Providers, target: wire.RealtimeTarget) -> str | None:
    """``providers.voice_live.voice`` when ``target`` is a Voice Live session."""
    voice_live = providers.voice_live
    return voice_live.voice if target.dialect == "voice_live" and voice_live is not None else None


# --- transcript verification ----------------------------------------------------------------

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def normalized_words(text: str) -> list[str]:
    """Words of ``text`` for comparison: NFKC, case-folded, punctuation dropped, apostrophes
    inside words removed (``Don't`` == ``dont``)."""
    folded = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()
    return [word.replace("'", "") for word in re.findall(r"[\w']+", folded)
            if word.replace("'", "")]


def transcript_difference(expected: str, spoken: str) -> str | None:
    """``None`` when ``spoken`` says ``expected``; else a one-line description of the first
    difference."""
    want, got = normalized_words(expected), normalized_words(spoken)
    if want == got:
        return None
    matcher = difflib.SequenceMatcher(a=want, b=got, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        missing, extra = " ".join(want[a0:a1]), " ".join(got[b0:b1])
        where = f"at word {a0 + 1}"
        if tag == "delete":
            return f"{where}: expected {missing!r}, which was not spoken"
        if tag == "insert":
            return f"{where}: {extra!r} was spoken but not requested"
        return f"{where}: expected {missing!r} but {extra!r} was spoken"
    return "the transcripts differ"


# --- the provider ---------------------------------------------------------------------------

class VoiceLiveSpeechSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: ProviderName = "voice_live"
    model: str | None = None
    voice: str | None = None
    uri: str | None = None
    api_version: str | None = None
    mode: Literal["pre_generated", "instructed"] | None = None
    verify_transcript: bool = True
    max_attempts: Annotated[int, Field(ge=1, le=5)] = 2
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 15.0
    response_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024


class VoiceLiveSpeechProvider:
    """Text -> canonical PCM spoken by a realtime session, verified against its transcript."""

    name = "voice_live"
    cacheable = True
    seed_dependent = False

    def __init__(self, settings: Mapping[str, object] | None, context: SpeechContext):
        self._settings, self._target = parse_realtime_settings(
            VoiceLiveSpeechSettings, settings, context, key="speech_settings")
        self._context = context
        self._mode = self._settings.mode or ("pre_generated" if self._target.dialect == "voice_live"
                                             else "instructed")
        self._scrubber: SecretScrubber = context.scrubber.with_values(self._target.secrets())
        self._session_voice = (self._settings.voice
                               or provider_voice(context.providers, self._target))
        self._conn: RealtimeConnection | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: SpeechContext) -> None:
        parse_realtime_settings(VoiceLiveSpeechSettings, settings, context, key="speech_settings")

    @property
    def mode(self) -> str:
        return self._mode

    async def _session(self) -> RealtimeConnection:
        if self._conn is not None and self._conn.is_open:
            return self._conn
        settings = self._settings
        headers = await self._target.headers()
        self._scrubber = self._scrubber.with_values(self._target.credential_values(headers))
        conn = await RealtimeConnection.open(
            self._target.url, headers=headers,
            connect_timeout_seconds=settings.connect_timeout_seconds,
            max_message_bytes=settings.max_message_bytes, scrubber=self._scrubber,
            clock_ns=time.perf_counter_ns)
        session: dict[str, object] = {"instructions": READ_ALOUD_INSTRUCTIONS}
        if self._session_voice:
            session["voice"] = wire.voice_param(self._target.dialect, self._session_voice)
        await conn.send(wire.session_update(wire.build_session(self._target.session_format,
                                                               session)))
        self._conn = conn
        return conn

    def _request(self, text: str, voice: str | None) -> dict[str, JsonValue]:
        fmt = self._target.session_format
        # A per-response voice only when it differs from the session's.
        voice_value = (wire.voice_param(self._target.dialect, voice)
                       if voice and voice != self._session_voice else None)
        if self._mode == "pre_generated":
            message = {"type": "message", "role": "assistant",
                       "content": [{"type": "text", "text": text}]}
            params = wire.audio_response_params(fmt, voice=voice_value,
                                                pre_generated_assistant_message=message)
        else:
            item = wire.user_text_item(text)["item"]
            params = wire.audio_response_params(fmt, voice=voice_value, conversation="none",
                                                input=[item], instructions=READ_ALOUD_INSTRUCTIONS)
        return wire.response_create(params)

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        """Speak ``text`` verbatim; ``seed`` is ignored (the service is not seedable)."""
        audio, _ = await self.synthesize_metered(text, voice=voice, seed=seed)
        return audio

    async def synthesize_metered(self, text: str, *, voice: str | None,
                                 seed: int) -> tuple[PcmAudio, list[Usage]]:
        """:meth:`synthesize`, and each response's usage (an attempt whose transcript did not
        match was paid for too)."""
        if self._closed:
            raise ExecutionError("the voice_live speech provider is closed")
        if not text.strip():
            return PcmAudio.silence(0.2), []
        attempts = self._settings.max_attempts if self._mode == "instructed" else 1
        spent: list[Usage] = []
        async with self._lock:
            for attempt in range(1, attempts + 1):
                audio, transcript, usage = await self._speak_once(text, voice)
                spent.append(usage)
                difference = (transcript_difference(text, transcript)
                              if self._settings.verify_transcript else None)
                if difference is None:
                    return audio, spent
                logger.info("voice_live attempt %d/%d spoke other text (%s)", attempt, attempts,
                            difference)
        raise SpeechMismatchError(self._scrubber.scrub_text(
            f"voice_live did not speak the requested text verbatim ({difference}); requested "
            f"{text!r}, the service's transcript was {transcript!r}"))

    async def _speak_once(self, text: str, voice: str | None) -> tuple[PcmAudio, str, Usage]:
        try:
            conn = await self._session()
            await conn.send(self._request(text, voice))
            return await self._collect(conn)
        except EndpointError as error:  # the speech service, not the product, failed
            await self._drop_session()
            raise ExecutionError(f"voice_live: {error} ({error.code})") from None
        except ExecutionError:
            await self._drop_session()
            raise

    async def _collect(self, conn: RealtimeConnection) -> tuple[PcmAudio, str, Usage]:
        timeout = self._settings.response_timeout_seconds
        deadline = time.monotonic() + timeout
        response_id: str | None = None
        chunks: list[bytes] = []
        transcript: str | None = None
        while True:
            try:
                _, message = await conn.next(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise ExecutionError(f"voice_live: no complete response from {conn.where} "
                                     f"within {timeout:g} s") from None
            if isinstance(message, Closure):
                raise ExecutionError(self._scrubber.scrub_text(
                    f"voice_live: {conn.where} closed the session mid-synthesis "
                    f"(code {message.code}: {message.reason or 'no reason'})"))
            kind = wire.kind_of(message)
            if kind == "error":
                code, detail = wire.error_detail(message)
                raise ExecutionError(self._scrubber.scrub_text(
                    f"voice_live: the service reported {code}: {detail}"))
            if kind == "response_created":
                created = field_mapping(message, "response").get("id")
                response_id = created if isinstance(created, str) else None
            elif response_id and message.get("response_id") not in (None, response_id):
                continue  # an event of an earlier response
            if kind == "audio_delta":
                try:
                    chunks.append(wire.decode_audio(message))
                except ValueError as error:
                    raise ExecutionError(f"voice_live: unusable audio delta: {error}") from None
            elif kind == "transcript_done":
                transcript = str(message.get("transcript") or "")
            elif kind == "response_done":
                return self._finish(message, chunks, transcript)

    def _finish(self, message: Mapping[str, object], chunks: list[bytes],
                transcript: str | None) -> tuple[PcmAudio, str, Usage]:
        response = field_mapping(message, "response")
        status = response.get("status") or "completed"
        if status != "completed":
            raise ExecutionError(f"voice_live: the response ended with status {status!r}: "
                                 f"{self._scrubber.scrub(response.get('status_details'))}")
        audio = b"".join(chunks)
        if not audio:
            raise ExecutionError("voice_live: the response held no audio")
        if transcript is None and self._settings.verify_transcript:
            raise ExecutionError("voice_live: the response held no output audio transcript, so "
                                 "the spoken text cannot be verified (verify_transcript: false "
                                 "skips the check)")
        reported = response.get("usage")
        usage = realtime_usage(reported if isinstance(reported, Mapping) else None,
                               component="speech",
                               provider=self._target.dialect, model=self._target.model,
                               output_text=transcript or "",
                               output_audio_seconds=CANONICAL_FORMAT.seconds_for_bytes(len(audio)))
        return PcmAudio.from_bytes(audio), transcript or "", usage

    async def _drop_session(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close("voice_live synthesis failed")

    async def aclose(self) -> None:
        self._closed = True
        await self._drop_session()
