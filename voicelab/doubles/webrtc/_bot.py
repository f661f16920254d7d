"""A voice bot served over WebRTC (the test double of ``adapter: webrtc``), on 127.0.0.1.

It answers the three signalling contracts the adapter speaks, written from their public
descriptions independently of the adapter's own code so the two check each other:

* ``smallwebrtc`` (pipecat's development runner): ``POST /api/offer`` with JSON ``{"sdp",
  "type": "offer", "pc_id"}`` -> ``{"sdp", "type": "answer", "pc_id"}``; ``PATCH /api/offer``
  with ``{"pc_id", "candidates": [{"candidate", "sdp_mid", "sdp_mline_index"}]}`` (trickle);
* ``whip`` (RFC 9725): ``POST /whip`` with ``application/sdp`` -> ``201 Created``, a
  ``Location`` and the answer; ``DELETE`` that location ends the session; with ``token`` set,
  ``Authorization: Bearer <token>`` is required (``401`` otherwise);
* ``fastrtc``: ``POST /webrtc/offer`` with ``{"sdp", "type", "webrtc_id"}`` -> ``{"sdp",
  "type"}``, or ``{"status": "failed", "meta": {"error": "concurrency_limit_reached",
  "limit": N}}`` past ``max_calls``.

Each call (:mod:`._call`) greets, answers each utterance in tone speech, stops when talked
over, and with ``rtvi`` sends pipecat's RTVI messages on the data channel the caller opened.
``hostile`` makes it misbehave on purpose: ``huge_answer`` (an answer SDP of megabytes),
``data_flood`` / ``big_data_message`` (the data channel), ``silent_track`` (no RTP ever),
``rtp_flood`` (packets as fast as the sender goes), ``bad_ice`` (an answer whose candidates
lead nowhere), ``bad_fingerprint`` (an answer whose DTLS fingerprint is not its certificate's),
``transport_lost`` (its UDP sockets close a second into the call, with no goodbye: a crashed
product or a path that died), ``refuse`` (every fastrtc offer refused), ``renegotiate`` (asks for a new offer
on the data channel, as pipecat's SmallWebRTC does when its tracks change).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Self

import numpy as np
from pydantic import JsonValue

from ...audio import tone_speech
from ...endpoints import parse_settings
from ...endpoints.webrtc import gathering_on
from .._json import JsonObject, object_or_empty
from ._call import RATE_HZ, BotCall, CallRecord, encode_all
from ._dead_air import with_pause
from ._http import Request, Response, SignallingServer
from ._settings import WebRtcBotSettings

if TYPE_CHECKING:
    from aiortc import RTCPeerConnection

logger = logging.getLogger(__name__)

JSON_TYPE = {"Content-Type": "application/json"}


class WebRtcBot:
    """The bot and its signalling server: ``await start()``, then :attr:`url`; ``calls`` holds
    one :class:`CallRecord` per call; ``on_event`` gets each thing it did as JSON."""

    def __init__(self, settings: WebRtcBotSettings | Mapping[str, object] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 on_event: Callable[[JsonObject], None] | None = None):
        self.settings = parse_settings(WebRtcBotSettings, settings)
        self.on_event = on_event
        self.calls: list[CallRecord] = []
        self.log: list[JsonObject] = []
        self._live: dict[str, BotCall] = {}
        self._voices: dict[str, tuple[np.ndarray, list[bytes]]] = {}
        self._server = SignallingServer(self._route, host=host, port=port)

    @property
    def url(self) -> str:
        """``http://host:port`` (the paths are the signalling flavours')."""
        if self._server.port is None:
            raise RuntimeError("the WebRTC bot is not started")
        return f"http://{self._server.host}:{self._server.port}"

    async def start(self) -> str:
        from aiortc import RTCPeerConnection  # noqa: F401  (load it before the first call)

        # every line the bot is configured to say, encoded before any call: encoding a reply
        # (~0.6 ms a packet) in the middle of 20 calls blocked the loop ~60 ms as the first
        # call began its reply, and every other call's reply stalled right after its first
        # packet (a product stall at the onset, which the benchmark read as error)
        for text in (self.settings.greeting, self.settings.reply_text, *self.settings.replies):
            self.voice(text)
        await self._server.start()
        return self.url

    async def stop(self) -> None:
        await self._server.stop()
        for call in list(self._live.values()):
            await call.close()
        self._live.clear()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def report(self, entry: JsonObject) -> None:
        self.log.append(entry)
        if self.on_event is not None:
            self.on_event(entry)

    def voice(self, text: str) -> tuple[np.ndarray, list[bytes]]:
        """``text`` as tone speech at 48 kHz and as its Opus packets (kept: the bot says the
        same lines again, in every call)."""
        voiced = self._voices.get(text)
        if voiced is None:
            samples = with_pause(tone_speech(text, seed=self.settings.voice_seed,
                                             sample_rate_hz=RATE_HZ).samples,
                                 pause_ms=self.settings.reply_pause_ms)
            voiced = self._voices[text] = (samples, encode_all(samples))
        return voiced

    # --- signalling -------------------------------------------------------------------------

    async def _route(self, request: Request) -> Response:
        path = request.path.split("?")[0]
        if path == "/api/offer" and request.method == "POST":
            return await self._smallwebrtc_offer(request)
        if path == "/api/offer" and request.method == "PATCH":
            return await self._smallwebrtc_candidates(request)
        if path == "/whip" and request.method == "POST":
            return await self._whip_offer(request)
        if path.startswith("/whip/") and request.method == "DELETE":
            return await self._whip_delete(request, path.removeprefix("/whip/"))
        if path == "/webrtc/offer" and request.method == "POST":
            return await self._fastrtc_offer(request)
        return Response(404, b"no such resource")

    async def _answer(self, offer_sdp: str, signalling: str, call_id: str) -> str:
        """A new call answering ``offer_sdp``: the answer SDP (hostile bots spoil it)."""
        from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        record = CallRecord(index=len(self.calls) + 1, signalling=signalling)
        self.calls.append(record)
        call = BotCall(pc, record, self.settings, voice=self.voice, note=self.report)
        self._live[call_id] = call
        self._watch(pc, call, call_id)
        with gathering_on(self.settings.ice_host_addresses):
            await pc.setRemoteDescription(RTCSessionDescription(offer_sdp, "offer"))
            pc.addTrack(call.track)
            await pc.setLocalDescription(await pc.createAnswer())
        call.note("call_started", signalling=signalling, call_id=call_id)
        return self._spoiled(pc.localDescription.sdp)

    def _watch(self, pc: RTCPeerConnection, call: BotCall, call_id: str) -> None:
        @pc.on("track")
        def _track(track: object) -> None:
            call.spawn(call.listen(track))  # type: ignore[arg-type]

        @pc.on("datachannel")
        def _channel(channel: object) -> None:
            call.on_channel(channel)  # type: ignore[arg-type]

        @pc.on("connectionstatechange")
        async def _state() -> None:
            call.note("connection_state", state=pc.connectionState)
            if pc.connectionState in ("failed", "closed"):
                self._live.pop(call_id, None)
                await call.close()
                call.note("call_ended")

    def _spoiled(self, sdp: str) -> str:
        hostile = self.settings.hostile
        if hostile == "huge_answer":
            return sdp + "".join(f"a=x-padding:{'x' * 1000}\r\n" for _ in range(5000))
        if hostile == "bad_ice":
            lines = [line for line in sdp.split("\r\n") if not line.startswith("a=candidate")]
            return "\r\n".join(lines)
        if hostile == "bad_fingerprint":  # a certificate fingerprint that is not its own
            return re.sub(r"(a=fingerprint:sha-256 )[0-9A-Fa-f:]+",
                          lambda match: match.group(1) + ":".join(["AB"] * 32), sdp)
        return sdp

    async def _smallwebrtc_offer(self, request: Request) -> Response:
        body = _json_body(request)
        sdp, pc_id = body.get("sdp"), body.get("pc_id")
        if not isinstance(sdp, str) or body.get("type") != "offer":
            return Response(400, b"expected {sdp, type: offer, pc_id}")
        if pc_id is not None:
            return Response(400, b"renegotiation is not supported by this bot")
        pc_id = f"SmallWebRTCConnection#{uuid.uuid4().hex[:8]}"
        answer = await self._answer(sdp, "smallwebrtc", pc_id)
        return Response(200, json.dumps({"sdp": answer, "type": "answer",
                                         "pc_id": pc_id}).encode(), JSON_TYPE)

    async def _smallwebrtc_candidates(self, request: Request) -> Response:
        from aiortc.sdp import candidate_from_sdp

        body = _json_body(request)
        call = self._live.get(str(body.get("pc_id")))
        candidates = body.get("candidates")
        if call is None or not isinstance(candidates, list):
            return Response(404, b"no such peer connection")
        for entry in candidates[:100]:
            item = object_or_empty(entry)
            text = str(item.get("candidate", "")).removeprefix("candidate:")
            if not text:
                continue
            candidate = candidate_from_sdp(text)
            candidate.sdpMid = str(item.get("sdp_mid")) if item.get("sdp_mid") is not None \
                else None
            index = item.get("sdp_mline_index")
            candidate.sdpMLineIndex = index if isinstance(index, int) else None
            await call.pc.addIceCandidate(candidate)
        return Response(200, b'{"status": "success"}', JSON_TYPE)

    async def _whip_offer(self, request: Request) -> Response:
        token = self.settings.token
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            return Response(401, b"unauthorized", {"WWW-Authenticate": "Bearer"})
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/sdp":
            return Response(415, b"expected application/sdp")
        session = uuid.uuid4().hex
        answer = await self._answer(request.body.decode("utf-8", "replace"), "whip", session)
        return Response(201, answer.encode(), {"Content-Type": "application/sdp",
                                               "Location": f"/whip/{session}",
                                               "ETag": f'"{session[:8]}"'})

    async def _whip_delete(self, request: Request, session: str) -> Response:
        token = self.settings.token
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            return Response(401, b"unauthorized")
        call = self._live.pop(session, None)
        if call is None:
            return Response(404, b"no such session")
        call.note("whip_deleted", ns=time.perf_counter_ns())
        await call.close()
        return Response(200)

    async def _fastrtc_offer(self, request: Request) -> Response:
        body = _json_body(request)
        sdp, webrtc_id = body.get("sdp"), body.get("webrtc_id")
        if not isinstance(sdp, str) or not isinstance(webrtc_id, str):
            return Response(400, b"expected {sdp, type, webrtc_id}")
        limit = self.settings.max_calls
        if self.settings.hostile == "refuse" or (limit and len(self._live) >= limit):
            refusal: JsonObject = {"status": "failed", "meta": {
                "error": "concurrency_limit_reached", "limit": limit}}
            return Response(200, json.dumps(refusal).encode(), JSON_TYPE)
        answer = await self._answer(sdp, "fastrtc", webrtc_id)
        return Response(200, json.dumps({"sdp": answer, "type": "answer"}).encode(), JSON_TYPE)


def _json_body(request: Request) -> JsonObject:
    try:
        value: JsonValue = json.loads(request.body)
    except ValueError:
        return {}
    return object_or_empty(value)
