"""Opening a WebSocket connection (:class:`._socket.WebSocketConnection`): TCP (read with the
kernel's receive stamps where it can: :mod:`._stamped_stream`), TLS for ``wss://``, an HTTP(S)
proxy's tunnel, the opening handshake, and every failure mapped to an :class:`EndpointError`
code (or raised as voicelab's own :class:`._socket.WebSocketInternalError`)."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable, Mapping

from websockets.client import ClientProtocol
from websockets.exceptions import (
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)
from websockets.uri import parse_uri

from ..config import SecretScrubber
from ._inbox import MessageInbox
from ._protocol import EndpointError
from ._proxy import ProxyRefused, proxy_for, tunnel
from ._socket import WebSocketConnection
from ._stamped_stream import connect_stamped, kernel_stamps_available

__all__ = ["KERNEL_STAMPS_VARIABLE", "open_websocket"]

#: ``VOICELAB_KERNEL_STAMPS=0`` turns the kernel's receive stamps off for every connection of the
#: process (and of the worker processes it starts, which inherit it): a diagnostic, to measure
#: what the stamped read path costs against the loop's own transport (docs/performance.md)
KERNEL_STAMPS_VARIABLE = "VOICELAB_KERNEL_STAMPS"


def _kernel_stamps_wanted() -> bool:
    return os.environ.get(KERNEL_STAMPS_VARIABLE, "").strip() != "0"


async def _connect(url: str, *, headers: Mapping[str, str], max_message_bytes: int,
                   user_agent: str, clock_ns: Callable[[], int], inbox: MessageInbox,
                   ssl_context: ssl.SSLContext | None, kernel_stamps: bool
                   ) -> WebSocketConnection:
    uri = parse_uri(url)
    protocol = ClientProtocol(uri, max_size=max_message_bytes)  # no extensions: no compression
    request = protocol.connect()
    request.headers.update(headers)
    request.headers.setdefault("User-Agent", user_agent)
    protocol.send_request(request)
    tls = (ssl_context or ssl.create_default_context()) if uri.secure else None
    connection = WebSocketConnection(protocol, clock_ns=clock_ns, inbox=inbox)
    loop = asyncio.get_running_loop()
    proxy = proxy_for(uri)
    if proxy is None and tls is None and kernel_stamps and kernel_stamps_available() \
            and _kernel_stamps_wanted():
        stamped = await connect_stamped(uri.host, uri.port, connection, clock_ns=clock_ns)
        connection.kernel_stamps = stamped.kernel_stamps
    elif proxy is None:
        await loop.create_connection(lambda: connection, uri.host, uri.port, ssl=tls)
    else:
        tunneled = await tunnel(proxy, uri.host, uri.port, user_agent=user_agent)
        try:
            transport = tunneled if tls is None else await loop.start_tls(
                tunneled, connection, tls, server_hostname=uri.host)
        except BaseException:
            tunneled.abort()
            raise
        if transport is None:  # the loop closed the tunnel during the TLS handshake
            raise ProxyRefused(None, "TLS through the proxy's tunnel failed")
        transport.set_protocol(connection)
        connection.connection_made(transport)
    try:
        await connection.handshake()
    except BaseException:
        connection.abort()
        raise
    return connection


async def open_websocket(url: str, *, headers: Mapping[str, str], connect_timeout_seconds: float,
                         max_message_bytes: int, clock_ns: Callable[[], int],
                         inbox: MessageInbox, where: str, scrubber: SecretScrubber,
                         user_agent: str, rejected_codes: Mapping[int, str] | None = None,
                         ssl_context: ssl.SSLContext | None = None,
                         kernel_stamps: bool = True) -> WebSocketConnection:
    """Connect and perform the opening handshake (``headers`` and ``User-Agent``, messages up to
    ``max_message_bytes``, no compression); from then on messages arrive in ``inbox``.

    ``wss://`` uses ``ssl_context``, by default the system's trusted certificates. An HTTP(S)
    proxy named in the environment (``https_proxy``, ``no_proxy``, ...) is used through a
    ``CONNECT`` tunnel, as websockets' own client does. Failures map to
    :class:`EndpointError` codes: ``connect_timeout``, ``handshake_rejected`` (or
    ``rejected_codes[status]``), ``connection_refused``, ``handshake_failed``,
    ``connection_failed``. Messages are scrubbed of secrets. ``kernel_stamps``: stamp messages
    with the kernel's receive stamps where it can (Linux, ``ws://`` without a proxy; see
    :class:`WebSocketConnection`); off (or ``VOICELAB_KERNEL_STAMPS=0``), every message gets the
    loop's stamp as it reads it.
    """

    def failure(code: str, message: str) -> EndpointError:
        return EndpointError(scrubber.scrub_text(message), code=code)

    try:
        return await asyncio.wait_for(_connect(
            url, headers=headers, max_message_bytes=max_message_bytes, user_agent=user_agent,
            clock_ns=clock_ns, inbox=inbox, ssl_context=ssl_context,
            kernel_stamps=kernel_stamps), connect_timeout_seconds)
    except TimeoutError:
        raise failure("connect_timeout", f"no WebSocket handshake with {where} within "
                      f"{connect_timeout_seconds:g} s") from None
    except InvalidStatus as error:
        status = error.response.status_code
        code = (rejected_codes or {}).get(status, "handshake_rejected")
        raise failure(code, f"{where} rejected the WebSocket handshake: HTTP {status}") from None
    except ConnectionRefusedError:
        raise failure("connection_refused", f"connection refused by {where}") from None
    except (InvalidURI, InvalidHandshake, WebSocketException) as error:
        raise failure("handshake_failed", f"WebSocket handshake with {where} failed: "
                      f"{type(error).__name__}") from None
    except OSError as error:
        raise failure("connection_failed", f"cannot connect to {where}: "
                      f"{error.strerror or type(error).__name__}") from None
