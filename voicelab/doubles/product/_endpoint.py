"""An adapter that embeds its own local protocol-v1 product.

``connect()`` starts the product (a :class:`ProductServer`) on 127.0.0.1 (ephemeral port) and
reaches it through the production WebSocket adapter, so a credential-free run still exercises
the real wire protocol, the strict ``evaluator.init`` handshake and real sockets. The product's
SQLite database outlives ``close()`` (the runner probes after closing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from ...endpoints._abilities import EndpointSettings
from ...endpoints._protocol import EndpointContext
from ...endpoints._settings import AdapterSettings, parse_settings
from ...endpoints.websocket import WebSocketEndpoint, WebSocketSettings
from ._connection import SessionRecord
from ._server import ProductServer
from ._store import ProductProbe

#: The client's address until the product has started (``connect`` sets the real one).
UNSTARTED_URI = "ws://127.0.0.1:0/"


class ProductClientSettings(AdapterSettings):
    """The WebSocket client's settings, mixed into a product's behaviour settings:
    ``class Settings(ProductClientSettings, Behaviour)`` (this order keeps the behaviour's
    fields first). An ``access_token`` of the behaviour is also sent by the client."""

    behaviour_model: ClassVar[type[BaseModel]]

    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 5.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0

    def behaviour(self) -> BaseModel:
        """The product's behaviour settings alone."""
        model = self.behaviour_model
        return model(**self.model_dump(include=set(model.model_fields)))

    def client(self, uri: str) -> WebSocketSettings:
        return WebSocketSettings(
            uri=uri, headers=self.headers, access_token=getattr(self, "access_token", None),
            connect_timeout_seconds=self.connect_timeout_seconds,
            receive_timeout_seconds=self.receive_timeout_seconds,
            max_message_bytes=self.max_message_bytes, chunk_ms=self.chunk_ms,
            turn_taking=getattr(self, "turn_taking", "client"))


class ProductEndpoint(WebSocketEndpoint):
    """The WebSocket adapter connected to its own embedded product (:attr:`product`).

    A subclass names its :attr:`settings_model` and builds the product in :meth:`build_product`;
    :meth:`outcome_probe` returns the probe bound to the product's database.
    """

    settings_model: ClassVar[type[ProductClientSettings]]

    def __init__(self, settings: Mapping[str, object] | ProductClientSettings | None,
                 context: EndpointContext):
        self._product_settings = parse_settings(self.settings_model, settings)
        super().__init__(self._product_settings.client(UNSTARTED_URI), context)
        self.product = self.build_product(self._product_settings.behaviour(), context)

    def build_product(self, behaviour: BaseModel, context: EndpointContext) -> ProductServer:
        raise NotImplementedError

    @classmethod
    def turn_taking(cls, settings: EndpointSettings) -> str:
        """The client's turn taking: the behaviour's ``turn_taking``, when it has one."""
        return parse_settings(cls.settings_model, settings).client(UNSTARTED_URI).turn_taking

    @property
    def session_record(self) -> SessionRecord | None:
        """The product's record of this adapter's connection (client message order etc.)."""
        return self.product.sessions[0] if self.product.sessions else None

    def outcome_probe(self) -> ProductProbe:
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
