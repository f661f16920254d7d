"""The three ways to hand a WebRTC product an offer and get its answer, over HTTP.

* ``smallwebrtc`` (pipecat's development runner, ``SmallWebRTCRequestHandler``): ``POST`` JSON
  ``{"sdp", "type": "offer", "pc_id": null}`` -> ``{"sdp", "type": "answer", "pc_id"}``.
  Nothing ends the session but the peer connection closing.
* ``whip`` (RFC 9725): ``POST`` the offer as ``application/sdp`` (with ``Authorization: Bearer``
  when a token is set) -> ``201 Created``, ``Location`` of the session and the answer as
  ``application/sdp``; ``DELETE`` that location ends the session.
* ``fastrtc``: ``POST`` JSON ``{"sdp", "type": "offer", "webrtc_id"}`` -> ``{"sdp", "type"}``,
  or a refusal ``{"status": "failed", "meta": {"error": ...}}`` (e.g.
  ``concurrency_limit_reached``), which becomes an execution failure naming the reason.

aiortc gathers every candidate before the offer is made, so offers carry their candidates and
no trickle ``PATCH`` is needed. Every answer is read within ``limits.max_answer_bytes`` (a
product's megabytes of SDP are refused before they are held whole) and checked to be an SDP.
"""

from __future__ import annotations

import json
import logging
import ssl
from dataclasses import dataclass
from functools import cache
from typing import Literal
from urllib.parse import urljoin

import httpx
from pydantic import JsonValue

from ...config import SecretScrubber
from .._protocol import EndpointError
from ._settings import WebRtcSettings

logger = logging.getLogger(__name__)

#: the most of a refusal's body quoted in an error
QUOTE_CHARS = 200


@cache
def _tls_context() -> ssl.SSLContext:
    """The system's default TLS context, made once a process: httpx makes (and loads the CA
    store into) a new one for every client otherwise, 20-40 ms on the event loop per call."""
    return ssl.create_default_context()


@dataclass(frozen=True)
class Answer:
    """The product's answer, and what names the session (pc_id, WHIP location, webrtc_id)."""

    sdp: str
    session: str | None = None


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes


class Signalling:
    """One call's signalling: :meth:`offer` once, :meth:`end` when the call is over."""

    def __init__(self, settings: WebRtcSettings, *, scrubber: SecretScrubber, webrtc_id: str,
                 traceparent: str, timeout_seconds: float):
        self._settings, self._scrubber, self._webrtc_id = settings, scrubber, webrtc_id
        headers = dict(settings.headers)
        headers["traceparent"] = traceparent
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_seconds,
                                         follow_redirects=False, verify=_tls_context())
        self._whip_location: str | None = None

    async def offer(self, sdp: str) -> Answer:
        """Send the offer; the answer, or :class:`EndpointError` naming what went wrong."""
        flavour = self._settings.signalling
        if flavour == "whip":
            return await self._whip(sdp)
        body: dict[str, JsonValue] = {"sdp": sdp, "type": "offer"}
        if flavour == "smallwebrtc":
            body["pc_id"] = None
        else:
            body["webrtc_id"] = self._webrtc_id
        reply = await self._request("POST", self._settings.offer_url, content=json.dumps(body),
                                    content_type="application/json")
        self._check_status(reply, expected=(200,))
        parsed = self._json(reply)
        if flavour == "fastrtc" and parsed.get("status") == "failed":
            meta = parsed.get("meta")
            reason = meta.get("error") if isinstance(meta, dict) else None
            raise EndpointError(self._scrub(f"the product refused the call: "
                                            f"{str(reason or 'no reason given')[:QUOTE_CHARS]}"),
                                code="call_refused")
        answer = parsed.get("sdp")
        if not isinstance(answer, str) or parsed.get("type") != "answer":
            raise EndpointError("the product's answer has no SDP of type answer",
                                code="signalling_failed")
        session = parsed.get("pc_id") if flavour == "smallwebrtc" else self._webrtc_id
        return Answer(_checked_sdp(answer), str(session) if session is not None else None)

    async def _whip(self, sdp: str) -> Answer:
        url = self._settings.offer_url
        reply = await self._request("POST", url, content=sdp, content_type="application/sdp")
        self._check_status(reply, expected=(201,))
        location = reply.headers.get("location")
        if not location:
            raise EndpointError("the WHIP endpoint answered 201 without a Location",
                                code="signalling_failed")
        self._whip_location = urljoin(url, location)
        return Answer(_checked_sdp(reply.body.decode("utf-8", "replace")), self._whip_location)

    async def end(self) -> None:
        """End the session where the flavour has a way (WHIP's ``DELETE``); never raises."""
        location, self._whip_location = self._whip_location, None
        try:
            if location is not None:
                reply = await self._request("DELETE", location)
                if reply.status >= 300:
                    logger.info("the WHIP DELETE answered %d", reply.status)
        except EndpointError as error:
            logger.info("could not end the WHIP session: %s", error)
        finally:
            await self._client.aclose()

    # --- HTTP ---------------------------------------------------------------------------------

    async def _request(self, method: Literal["POST", "DELETE"], url: str, *,
                       content: str | None = None, content_type: str | None = None) -> _Reply:
        headers = {"Content-Type": content_type} if content_type else {}
        limit = self._settings.limits.max_answer_bytes
        try:
            async with self._client.stream(method, url, content=content, headers=headers) \
                    as response:
                body = bytearray()
                async for piece in response.aiter_bytes():
                    body += piece
                    if len(body) > limit:
                        raise EndpointError(
                            f"the product's answer is larger than {limit:,} bytes "
                            f"(endpoint.settings.limits.max_answer_bytes)", code="resource_limit")
                return _Reply(response.status_code, response.headers, bytes(body))
        except httpx.ConnectError as error:
            raise EndpointError(self._scrub(f"cannot reach the signalling URL: {error}"),
                                code="connection_refused") from None
        except httpx.TimeoutException:
            raise EndpointError("the signalling request timed out",
                                code="connect_timeout") from None
        except httpx.HTTPError as error:
            raise EndpointError(self._scrub(f"signalling failed: {type(error).__name__}: "
                                            f"{error}"), code="signalling_failed") from None

    def _check_status(self, reply: _Reply, *, expected: tuple[int, ...]) -> None:
        if reply.status in expected:
            return
        quoted = reply.body[:QUOTE_CHARS].decode("utf-8", "replace").strip()
        raise EndpointError(self._scrub(f"the signalling request was answered {reply.status}"
                                        f"{': ' + quoted if quoted else ''}"),
                            code="handshake_rejected")

    def _json(self, reply: _Reply) -> dict[str, JsonValue]:
        try:
            parsed: JsonValue = json.loads(reply.body)
        except ValueError:
            raise EndpointError("the product's answer is not JSON",
                                code="signalling_failed") from None
        if not isinstance(parsed, dict):
            raise EndpointError("the product's answer is not a JSON object",
                                code="signalling_failed")
        return parsed

    def _scrub(self, text: str) -> str:
        return self._scrubber.scrub_text(text)


def _checked_sdp(sdp: str) -> str:
    if not sdp.startswith("v=0"):
        raise EndpointError("the product's answer is not an SDP", code="signalling_failed")
    return sdp
