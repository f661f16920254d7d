"""A local Azure Speech text-to-speech REST server on 127.0.0.1 for tests and demos.

It implements the contract the production client speaks: ``POST /cognitiveservices/v1`` (or
``/tts/cognitiveservices/v1``) with SSML, ``X-Microsoft-OutputFormat`` naming a 16-bit mono PCM
format, and either ``Ocp-Apim-Subscription-Key`` or ``Authorization: Bearer``. The audio is
deterministic tone speech of the SSML's text (pitch chosen by the voice name). Failures can be
scripted (``fail_next(429, retry_after=...)``) and every request is recorded with its secret
headers masked::

    with AzureTtsServer(api_key="test-key") as server:
        providers = Providers(azure_speech={"endpoint": server.endpoint, "api_key": "test-key"})
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import threading
import time
import wave
import xml.etree.ElementTree as ElementTree
from collections import deque
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler

from ...audio import tone_speech
from ...config import MASK, is_secret_name
from .._http_server import DoubleHTTPServer, ThreadedHttpDouble

__all__ = ["AzureTtsServer", "RecordedTtsRequest"]

TTS_PATHS = ("/cognitiveservices/v1", "/tts/cognitiveservices/v1")
_OUTPUT_FORMAT = re.compile(r"^(raw|riff)-(\d+)(khz|hz)-16bit-mono-pcm$")
_SSML_NS = "{http://www.w3.org/2001/10/synthesis}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


@dataclass
class RecordedTtsRequest:
    """One request as the server saw it (secret header values replaced by ``***``)."""

    method: str
    path: str
    headers: dict[str, str]
    ssml: str
    auth: str | None = None  # "key", "bearer" or None
    voice: str | None = None
    language: str | None = None
    text: str | None = None
    status: int = 0
    received_at: float = field(default_factory=time.monotonic)


@dataclass
class _ScriptedFailure:
    status: int
    retry_after: str | None
    body: str


def _parse_ssml(ssml: str) -> tuple[str, str | None, str]:
    """(voice name, xml:lang, spoken text); ``ValueError`` for malformed SSML."""
    try:
        root = ElementTree.fromstring(ssml)
    except ElementTree.ParseError as error:
        raise ValueError(f"SSML is not well-formed XML: {error}") from None
    if root.tag not in (f"{_SSML_NS}speak", "speak"):
        raise ValueError("SSML root element must be <speak>")
    voices = [element for element in root.iter() if element.tag in (f"{_SSML_NS}voice", "voice")]
    if not voices or not voices[0].get("name"):
        raise ValueError("SSML needs a <voice name='...'> element")
    text = "".join("".join(voice.itertext()) for voice in voices)
    return voices[0].get("name", ""), root.get(_XML_LANG), text


def _voice_seed(voice: str) -> int:
    return int.from_bytes(hashlib.sha256(voice.encode()).digest()[:4], "little")


class _Server(DoubleHTTPServer):
    owner: AzureTtsServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return None

    def _reply(self, status: int, body: bytes, *, content_type: str = "application/json",
               headers: dict[str, str] | None = None) -> None:
        record = getattr(self, "_record", None)
        if record is not None:
            record.status = status  # visible to the test before the client sees the reply
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-RequestId", hashlib.sha1(str(time.time_ns()).encode()).hexdigest())
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": {"code": str(status), "message": message}}).encode()
        self._reply(status, body, headers=headers)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._error(405, "method not allowed")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        ssml = self.rfile.read(length).decode("utf-8", errors="replace")
        headers = {name: (MASK if is_secret_name(name) else value)
                   for name, value in self.headers.items()}
        record = RecordedTtsRequest(method="POST", path=self.path, headers=headers, ssml=ssml)
        self._record = record
        with owner._lock:
            owner.requests.append(record)
        self._handle(owner, record, ssml)

    def _handle(self, owner: AzureTtsServer, record: RecordedTtsRequest, ssml: str) -> int:
        if owner.response_delay_seconds:
            time.sleep(owner.response_delay_seconds)
        if self.path.split("?")[0] not in TTS_PATHS:
            self._error(404, "resource not found")
            return 404
        record.auth = owner._authenticate(self.headers)
        if record.auth is None:
            self._error(401, "Access denied due to invalid subscription key or wrong API "
                             "endpoint. Make sure to provide a valid key for an active "
                             "subscription and use a correct regional API endpoint.")
            return 401
        failure = owner._next_failure()
        if failure is not None:
            extra = {"Retry-After": failure.retry_after} if failure.retry_after else None
            self._error(failure.status, failure.body, headers=extra)
            return failure.status
        output_format = self.headers.get("X-Microsoft-OutputFormat", "")
        match = _OUTPUT_FORMAT.match(output_format)
        if not match:
            self._error(400, f"unsupported output format {output_format!r}")
            return 400
        if not (self.headers.get("Content-Type") or "").startswith("application/ssml+xml"):
            self._error(400, "Content-Type must be application/ssml+xml")
            return 400
        try:
            record.voice, record.language, record.text = _parse_ssml(ssml)
        except ValueError as error:
            self._error(400, str(error))
            return 400
        rate = int(match.group(2)) * (1000 if match.group(3) == "khz" else 1)
        audio = tone_speech(record.text, seed=_voice_seed(record.voice), sample_rate_hz=rate)
        body = audio.to_bytes()
        content_type = "audio/x-wav" if match.group(1) == "riff" else "audio/basic"
        if match.group(1) == "riff":
            buffer = io.BytesIO()
            with wave.open(buffer, "wb") as handle:
                handle.setnchannels(1)
                handle.setsampwidth(2)
                handle.setframerate(rate)
                handle.writeframes(body)
            body = buffer.getvalue()
        self._reply(200, body, content_type=content_type)
        return 200


class AzureTtsServer(ThreadedHttpDouble):
    """The local TTS server. Accepts the key ``api_key`` and, when ``bearer_token`` is set, the
    header ``Bearer aad#{resource_id}#{bearer_token}`` (or ``Bearer {bearer_token}`` without a
    ``resource_id``)."""

    handler = _Handler
    server_class = _Server
    thread_name = "azure-tts-server"

    def __init__(self, *, api_key: str | None = "test-speech-key", bearer_token: str | None = None,
                 resource_id: str | None = None, response_delay_seconds: float = 0.0):
        self.api_key = api_key
        self.bearer_token = bearer_token
        self.resource_id = resource_id
        self.response_delay_seconds = response_delay_seconds
        self.requests: list[RecordedTtsRequest] = []
        self._failures: deque[_ScriptedFailure] = deque()
        self._lock = threading.Lock()

    # --- control --------------------------------------------------------------------------

    def fail_next(self, status: int, *, times: int = 1, retry_after: float | str | None = None,
                  body: str = "scripted failure") -> None:
        """The next ``times`` authenticated requests get ``status`` (with ``Retry-After``)."""
        value = None if retry_after is None else (
            retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
        with self._lock:
            self._failures.extend(_ScriptedFailure(status, value, body) for _ in range(times))

    def _next_failure(self) -> _ScriptedFailure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _authenticate(self, headers: Message) -> str | None:
        key = headers.get("Ocp-Apim-Subscription-Key")
        if key is not None:
            if self.api_key and hmac.compare_digest(key.encode(), self.api_key.encode()):
                return "key"
            return None
        authorization = headers.get("Authorization") or ""
        if self.bearer_token and authorization.startswith("Bearer "):
            expected = (f"aad#{self.resource_id}#{self.bearer_token}" if self.resource_id
                        else self.bearer_token)
            if hmac.compare_digest(authorization[len("Bearer "):].encode(), expected.encode()):
                return "bearer"
        return None

    @property
    def billed_characters(self) -> int:
        """What the service bills: the characters of every text it synthesized (a rejected or
        failed request is not billed)."""
        with self._lock:
            return sum(len(r.text or "") for r in self.requests if r.status == 200)

    @property
    def syntheses(self) -> int:
        """The requests it answered with audio."""
        with self._lock:
            return sum(r.status == 200 for r in self.requests)

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The value for ``providers.azure_speech.endpoint``."""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> AzureTtsServer:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)
