"""The embedded fake product adapter (``adapter: fake``).

``connect()`` starts a :class:`FakeProduct` on 127.0.0.1 (ephemeral port) and reaches it through
the production WebSocket adapter, so the credential-free CI path still exercises the real wire
protocol, the strict ``evaluator.init`` handshake and real sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from ._fake_behaviour import BEHAVIOUR_FIELDS, FakeBehaviour
from ._fake_product import FakeProduct, FakeSessionRecord
from ._fake_store import FakeProductProbe
from ._protocol import EndpointContext
from ._settings import parse_settings
from ._websocket import WebSocketEndpoint, WebSocketSettings


class FakeEndpointSettings(FakeBehaviour):
    """The fake's behaviour (see :class:`FakeBehaviour`) plus the WebSocket client's settings.

    ``access_token`` is both required by the fake and sent by the client.
    """

    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 5.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0

    def behaviour(self) -> FakeBehaviour:
        return FakeBehaviour(**self.model_dump(include=set(BEHAVIOUR_FIELDS)))

    def client(self, uri: str) -> WebSocketSettings:
        return WebSocketSettings(
            uri=uri, headers=self.headers, access_token=self.access_token,
            connect_timeout_seconds=self.connect_timeout_seconds,
            receive_timeout_seconds=self.receive_timeout_seconds,
            max_message_bytes=self.max_message_bytes, chunk_ms=self.chunk_ms)


class FakeProductEndpoint(WebSocketEndpoint):
    """The WebSocket adapter connected to its own embedded :class:`FakeProduct`.

    The fake's SQLite database outlives ``close()`` (the runner probes after closing);
    :meth:`outcome_probe` returns the probe bound to it.
    """

    capabilities = dict(WebSocketEndpoint.capabilities)

    def __init__(self, settings: Mapping[str, Any] | None, context: EndpointContext):
        self._fake_settings = parse_settings(FakeEndpointSettings, settings)
        super().__init__(self._fake_settings.client("ws://127.0.0.1:0/"), context)
        self.product = FakeProduct(self._fake_settings.behaviour(),
                                   default_session_id=context.session_id)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parse_settings(FakeEndpointSettings, settings)

    @property
    def session_record(self) -> FakeSessionRecord | None:
        """The fake's record of this adapter's connection (client message order etc.)."""
        return self.product.sessions[0] if self.product.sessions else None

    def outcome_probe(self) -> FakeProductProbe:
        return self.product.outcome_probe()

    async def connect(self) -> None:
        if self._state != "new":
            await super().connect()  # raises already_connected
        self._uri = await self.product.start()
        try:
            await super().connect()
        except BaseException:
            await self.product.stop()
            raise

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.product.stop()
