"""Azure Speech text-to-speech over its REST API (SSML in, raw PCM out).

``POST https://{region}.tts.speech.microsoft.com/cognitiveservices/v1`` (or the configured
``providers.azure_speech.endpoint``) with ``Content-Type: application/ssml+xml`` and
``X-Microsoft-OutputFormat``. Auth is the resource key (``Ocp-Apim-Subscription-Key``) or a
Microsoft Entra token (``Authorization: Bearer aad#{resource_id}#{token}`` when ``resource_id``
is set, else ``Bearer {token}``). 429 and 5xx are retried with backoff honoring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib.util
import inspect
import logging
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..audio import CANONICAL_SAMPLE_RATE_HZ, PcmAudio, read_wav_pcm
from ..config import AzureSpeechProvider as AzureSpeechConfig
from ..errors import AudioFileError, ConfigError, ExecutionError, MissingDependencyError
from ._piper import parse_speech_settings
from ._protocol import SpeechContext

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

DEFAULT_VOICE = "en-US-AvaNeural"
DEFAULT_LANGUAGE = "en-US"
TOKEN_SCOPE = "https://cognitiveservices.azure.com/.default"
TOKEN_REFRESH_MARGIN_SECONDS = 300.0
CONFIG_KEY = "providers.azure_speech"
SSML_NAMESPACE = "http://www.w3.org/2001/10/synthesis"
EMPTY_TEXT_SECONDS = 0.2

_OUTPUT_FORMAT = re.compile(r"^(raw|riff)-(\d+)(khz|hz)-16bit-mono-pcm$")
_VOICE_LOCALE = re.compile(r"^([a-z]{2,3}-[A-Za-z]{2,4}(?:-[A-Za-z]{2,4})?)-[A-Za-z]")
_LONG_VOICE_LOCALE = re.compile(r"\(([a-z]{2,3}-[A-Za-z]{2,4}),")
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_REGIONAL_API_HOST = re.compile(r"^([a-z0-9]+)\.api\.cognitive\.microsoft\.com$")
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class AzureSpeechError(ExecutionError):
    """Azure Speech failed to synthesize; ``status_code`` is the HTTP status (None: no reply)."""

    def __init__(self, message: str, *, status_code: int | None = None):
        self.status_code = status_code
        super().__init__(message)


class AzureSpeechSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_seconds: float = Field(30.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    backoff_seconds: float = Field(0.5, ge=0, description="first retry wait without Retry-After")
    max_retry_wait_seconds: float = Field(30.0, ge=0)
    language: str | None = Field(None, description="xml:lang; default: from the voice name")


def voice_locale(voice: str) -> str | None:
    """``en-US`` from ``en-US-AvaNeural`` or from the long form ``... (en-US, AvaNeural)``."""
    match = _VOICE_LOCALE.match(voice) or _LONG_VOICE_LOCALE.search(voice)
    return match.group(1) if match else None


def build_ssml(text: str, *, voice: str, language: str | None = None) -> str:
    """One ``<voice>`` element speaking ``text`` exactly (XML-escaped, invalid chars dropped)."""
    lang = language or voice_locale(voice) or DEFAULT_LANGUAGE
    clean = _XML_INVALID.sub("", text)
    return (f"<speak version='1.0' xmlns='{SSML_NAMESPACE}' xml:lang={quoteattr(lang)}>"
            f"<voice name={quoteattr(voice)}>{escape(clean)}</voice></speak>")


def output_sample_rate_hz(output_format: str) -> int:
    """The sample rate of a supported 16-bit mono PCM output format, else ``ConfigError``."""
    match = _OUTPUT_FORMAT.match(output_format)
    if not match:
        raise ConfigError(f"unsupported output_format {output_format!r}; use a 16-bit mono PCM "
                          f"format such as 'raw-24khz-16bit-mono-pcm'",
                          key=f"{CONFIG_KEY}.output_format")
    rate = int(match.group(2))
    return rate * 1000 if match.group(3) == "khz" else rate


def tts_url(config: AzureSpeechConfig) -> str:
    """The synthesis URL: the endpoint as given when it has a path, else its TTS path."""
    if not config.endpoint:
        return f"https://{config.region}.tts.speech.microsoft.com/cognitiveservices/v1"
    endpoint = config.endpoint.rstrip("/")
    parts = urlsplit(endpoint)
    host = (parts.hostname or "").lower()
    if parts.path not in ("", "/"):
        return endpoint
    regional = _REGIONAL_API_HOST.match(host)
    if regional:
        return f"https://{regional.group(1)}.tts.speech.microsoft.com/cognitiveservices/v1"
    if host.endswith(".cognitiveservices.azure.com"):
        return f"{endpoint}/tts/cognitiveservices/v1"
    return f"{endpoint}/cognitiveservices/v1"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) / 1000.0)
            except ValueError:
                pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _user_agent() -> str:
    from .._version import __version__

    return f"voicelab/{__version__}"


def _identity_installed() -> bool:
    try:
        return importlib.util.find_spec("azure.identity") is not None
    except ModuleNotFoundError:
        return False


class AzureSpeechProvider:
    """Cloud TTS: ``voice`` is an Azure neural voice name (default ``en-US-AvaNeural``).

    ``credential`` (keyword) injects any object with ``get_token(scope)`` (sync or async, like
    azure-identity's credentials) for ``auth: default_credential``; without it a
    ``DefaultAzureCredential`` is created on first use.
    """

    name = "azure_speech"
    cacheable = True
    seed_dependent = False

    def __init__(self, settings: Mapping[str, object] | None = None,
                 context: SpeechContext | None = None, *, credential: Any = None):
        self.context = context or SpeechContext()
        self.settings = parse_speech_settings(AzureSpeechSettings, settings)
        self.config = self._config(self.context, needs_identity=credential is None)
        self.url = tts_url(self.config)
        self.native_rate_hz = output_sample_rate_hz(self.config.output_format)
        self._credential = credential
        self._owns_credential = False
        self._token: str | None = None
        self._token_expires_on = 0.0
        self._client: httpx.AsyncClient | None = None
        secrets = [self.config.api_key] if self.config.api_key else []
        self._scrubber = self.context.scrubber.with_values(secrets)

    @staticmethod
    def _config(context: SpeechContext, *, needs_identity: bool) -> AzureSpeechConfig:
        config = context.providers.azure_speech
        if config is None:
            raise ConfigError("speech_provider 'azure_speech' needs providers.azure_speech "
                              "(region or endpoint, and auth)", key=CONFIG_KEY)
        if config.auth == "api_key" and not config.api_key:
            raise ConfigError("auth 'api_key' needs api_key (for example ${AZURE_SPEECH_KEY})",
                              key=f"{CONFIG_KEY}.api_key")
        if config.auth == "default_credential" and needs_identity and not _identity_installed():
            raise MissingDependencyError("azure-identity", extra="azure",
                                         purpose="Azure Speech with auth 'default_credential'",
                                         key=f"{CONFIG_KEY}.auth")
        output_sample_rate_hz(config.output_format)
        return config

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: SpeechContext) -> None:
        cls(settings, context)

    @property
    def cache_identity(self) -> dict[str, JsonValue]:
        return {"output_format": self.config.output_format, "language": self.settings.language}

    # --- auth -----------------------------------------------------------------------------

    async def _bearer_token(self) -> str:
        if self._token and time.time() < self._token_expires_on - TOKEN_REFRESH_MARGIN_SECONDS:
            return self._token
        if self._credential is None:
            from azure.identity import DefaultAzureCredential

            self._credential = DefaultAzureCredential()
            self._owns_credential = True
        get_token = self._credential.get_token
        try:
            if inspect.iscoroutinefunction(get_token):
                access = await get_token(TOKEN_SCOPE)
            else:
                access = await asyncio.to_thread(get_token, TOKEN_SCOPE)
        except Exception as error:  # noqa: BLE001 - credential chains raise many types
            detail = self._scrubber.scrub_text(str(error))[:300]
            raise AzureSpeechError(f"Azure Speech: could not get a Microsoft Entra token for "
                                   f"{TOKEN_SCOPE}: {type(error).__name__}: {detail}") from None
        self._token = str(access.token)
        self._token_expires_on = float(access.expires_on)
        self._scrubber = self._scrubber.with_values([self._token])
        return self._token

    async def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/ssml+xml",
                   "X-Microsoft-OutputFormat": self.config.output_format,
                   "User-Agent": _user_agent()}
        if self.config.auth == "api_key":
            headers["Ocp-Apim-Subscription-Key"] = str(self.config.api_key)
        else:
            token = await self._bearer_token()
            resource_id = self.config.resource_id
            headers["Authorization"] = (f"Bearer aad#{resource_id}#{token}" if resource_id
                                        else f"Bearer {token}")
        return headers

    # --- synthesis ------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(timeout=self.settings.timeout_seconds)
        return self._client

    def _wait_seconds(self, attempt: int, headers: Mapping[str, str] | None) -> float:
        hinted = retry_after_seconds(headers) if headers is not None else None
        wait = hinted if hinted is not None else self.settings.backoff_seconds * (2 ** attempt)
        return min(wait, self.settings.max_retry_wait_seconds)

    def _failure(self, status: int, body: str) -> AzureSpeechError:
        detail = " ".join(self._scrubber.scrub_text(body).split())[:200]
        suffix = f": {detail}" if detail else ""
        if status in (401, 403):
            hint = ("check providers.azure_speech.api_key and that region/endpoint match the "
                    "key's resource" if self.config.auth == "api_key" else
                    "check the identity has the 'Cognitive Services User' role on the resource, "
                    "the custom-domain endpoint and resource_id")
            return AzureSpeechError(f"Azure Speech rejected the credentials (HTTP {status}); "
                                    f"{hint}", status_code=status)
        if status == 400:
            return AzureSpeechError(f"Azure Speech rejected the request (HTTP 400: bad SSML, "
                                    f"voice or output format){suffix}", status_code=status)
        return AzureSpeechError(f"Azure Speech failed (HTTP {status}){suffix}",
                                status_code=status)

    async def synthesize(self, text: str, *, voice: str | None, seed: int) -> PcmAudio:
        import httpx

        if not _XML_INVALID.sub("", text).strip():
            return PcmAudio.silence(EMPTY_TEXT_SECONDS)  # nothing to say: no billable request
        ssml = build_ssml(text, voice=voice or DEFAULT_VOICE, language=self.settings.language)
        client = self._http()
        retries = self.settings.max_retries
        for attempt in range(retries + 1):
            headers = await self._headers()
            try:
                response = await client.post(self.url, content=ssml.encode("utf-8"),
                                             headers=headers)
            except httpx.TransportError as error:
                if attempt >= retries:
                    raise AzureSpeechError(f"Azure Speech unreachable at {self._safe_url()}: "
                                           f"{type(error).__name__} after {attempt + 1} "
                                           f"attempt(s)") from None
                await asyncio.sleep(self._wait_seconds(attempt, None))
                continue
            status = response.status_code
            if status == 200:
                return self._decode(response.content)
            if status in (401, 403):
                self._token = None
                raise self._failure(status, response.text)
            if status in _RETRY_STATUSES and attempt < retries:
                wait = self._wait_seconds(attempt, response.headers)
                logger.info("azure speech HTTP %s; retrying in %.2f s (%d/%d)", status, wait,
                            attempt + 1, retries)
                await asyncio.sleep(wait)
                continue
            failure = self._failure(status, response.text)
            if status in _RETRY_STATUSES:
                raise AzureSpeechError(f"{failure} after {attempt + 1} attempt(s)",
                                       status_code=status)
            raise failure
        raise AssertionError("unreachable")  # pragma: no cover

    def _safe_url(self) -> str:
        parts = urlsplit(self.url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"

    def _decode(self, body: bytes) -> PcmAudio:
        if self.config.output_format.startswith("riff-"):
            try:
                samples, _ = read_wav_pcm(body)
            except AudioFileError as error:
                raise AzureSpeechError(f"Azure Speech returned an unreadable WAV: "
                                       f"{error.message}") from None
            body = samples.astype("<i2", copy=False).tobytes()
        if not body:
            raise AzureSpeechError("Azure Speech returned no audio (HTTP 200, empty body)",
                                   status_code=200)
        if len(body) % 2:
            body = body[:-1]
        audio = PcmAudio.from_bytes(body, sample_rate_hz=self.native_rate_hz)
        if self.native_rate_hz == CANONICAL_SAMPLE_RATE_HZ:
            return audio
        import soxr

        floats = audio.samples.astype(np.float32) / 32768.0
        resampled = soxr.resample(floats, self.native_rate_hz, CANONICAL_SAMPLE_RATE_HZ,
                                  quality="HQ")
        return PcmAudio(np.clip(np.round(resampled * 32768.0), -32768, 32767).astype(np.int16))

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        if self._owns_credential and self._credential is not None:
            credential, self._credential = self._credential, None
            self._owns_credential = False
            try:
                credential.close()
            except Exception:  # noqa: BLE001 - closing a credential must not fail cleanup
                logger.debug("closing the credential failed", exc_info=True)
