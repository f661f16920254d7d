"""Reaching a WebSocket server through the HTTP(S) proxy the environment names (a ``CONNECT``
tunnel), as websockets' own client does; SOCKS proxies are not supported."""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import cast

from websockets.uri import WebSocketURI


class ProxyRefused(ConnectionError):
    """The HTTP proxy did not open a tunnel to the server."""


@dataclass(frozen=True, slots=True)
class Proxy:
    host: str
    port: int
    secure: bool  # https://: TLS to the proxy itself
    authorization: str | None  # the Proxy-Authorization header, from the URL's user info


def proxy_for(uri: WebSocketURI) -> Proxy | None:
    """The HTTP proxy the environment names for ``uri``, picked as websockets' own client picks
    it: ``wss_proxy`` or ``https_proxy`` (``ws_proxy``, ``https_proxy`` or ``http_proxy`` for
    ``ws://``), unless ``no_proxy`` covers the host."""
    if urllib.request.proxy_bypass(f"{uri.host}:{uri.port}"):
        return None
    proxies = urllib.request.getproxies()
    for scheme in ("wss", "https") if uri.secure else ("ws", "https", "http"):
        if scheme not in proxies:
            continue
        url = urllib.parse.urlsplit(proxies[scheme])
        if url.scheme not in ("http", "https") or url.hostname is None:
            raise ProxyRefused(None, f"unsupported proxy {url.scheme}:// in {scheme}_proxy")
        authorization = None
        if url.username is not None:
            credentials = f"{urllib.parse.unquote(url.username)}:" \
                          f"{urllib.parse.unquote(url.password or '')}"
            authorization = f"Basic {base64.b64encode(credentials.encode()).decode()}"
        secure = url.scheme == "https"
        return Proxy(url.hostname, url.port or (443 if secure else 80), secure, authorization)
    return None


class _TunnelRequest(asyncio.Protocol):
    """Asks an HTTP proxy for a tunnel (``CONNECT``) and waits for its 2xx answer."""

    def __init__(self, request: bytes):
        self._request = request
        self._answer = bytearray()
        self.answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: the method is checked,
        # never the class
        cast(asyncio.Transport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        self._answer += data
        if self.answered.done() or b"\r\n\r\n" not in self._answer:
            return
        status = bytes(self._answer).split(b"\r\n", 1)[0].split(b" ", 2)[1:2]
        if status and status[0].startswith(b"2"):
            self.answered.set_result(None)
        else:
            self.answered.set_exception(ProxyRefused(
                None, f"the proxy answered HTTP {status[0].decode(errors='replace')}"
                if status else "the proxy's answer is not HTTP"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answered.done():
            self.answered.set_exception(ProxyRefused(None, "the proxy closed the connection"))


async def tunnel(proxy: Proxy, host: str, port: int, *, user_agent: str) -> asyncio.Transport:
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    request = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: {user_agent}\r\n"
    if proxy.authorization is not None:
        request += f"Proxy-Authorization: {proxy.authorization}\r\n"
    asking = _TunnelRequest(f"{request}\r\n".encode())
    transport, _ = await asyncio.get_running_loop().create_connection(
        lambda: asking, proxy.host, proxy.port,
        ssl=ssl.create_default_context() if proxy.secure else None)
    try:
        await asking.answered
    except BaseException:
        transport.abort()
        raise
    return transport
