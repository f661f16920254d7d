"""A local protocol-v1 product as a server: a real WebSocket server on 127.0.0.1, its
lifecycle, bearer-token handshake, per-connection records and SQLite store.

The embedded fake product and the local demo agent are both built on this and on
:mod:`._connection` (the strict protocol); they keep what differs (what they say, how
they decide, what they persist, their faults).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from ...endpoints._settings import parse_settings
from .._bot_server import BotServer, ServeOptions
from ._connection import ProductBehaviour, ProductConnection, SessionRecord
from ._store import ProductDatabaseDir, ProductProbe, ProductStore

logger = logging.getLogger(__name__)


class ProductSettings(ProductBehaviour, Protocol):
    """What the server reads of every product's behaviour settings (a product's optional
    settings, ``database_path`` and ``access_token``, are read where they apply)."""

    @property
    def max_client_message_bytes(self) -> int: ...


#: what a product records of one connection
RecordT = TypeVar("RecordT", bound=SessionRecord)


class ProductServer(BotServer, Generic[RecordT]):
    """A protocol-v1 product as a server. ``await start()`` returns its ``ws://host:port/`` URI.

    A subclass names its behaviour settings, store, probe, temporary database directory and
    connection class; its behaviour has ``database_path`` and ``max_client_message_bytes`` and,
    for a bearer-token handshake, ``access_token``.
    """

    behaviour_model: ClassVar[type[BaseModel]]
    store_class: ClassVar[type[ProductStore]]
    probe_class: ClassVar[type[ProductProbe]]
    database_dir_class: ClassVar[type[ProductDatabaseDir]]
    connection_class: ClassVar[type[ProductConnection]]
    label: ClassVar[str] = "product"  # in log lines and errors
    log: ClassVar[logging.Logger] = logger  # a subclass logs under its own module's name

    def __init__(self, behaviour: BaseModel | Mapping[str, object] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 database_path: str | Path | None = None,
                 default_session_id: str | None = None):
        # every product's behaviour model has the fields ProductSettings names
        settings = cast(ProductSettings, parse_settings(self.behaviour_model, behaviour))
        self.behaviour: ProductSettings = settings
        super().__init__(host=host, port=port,
                         max_message_bytes=settings.max_client_message_bytes)
        self.name = f"the {self.label}"
        self._temporary: ProductDatabaseDir | None = None
        path = database_path or getattr(self.behaviour, "database_path", None)
        if path is None:
            self._temporary = self.database_dir_class()
            path = self._temporary.database_path
        self.database_path = Path(path)
        self.default_session_id = default_session_id
        self.store: ProductStore | None = None
        self.sessions: list[RecordT] = []

    def outcome_probe(self) -> ProductProbe:
        return self.probe_class({"database_path": str(self.database_path)},
                                keep_alive=self._temporary)

    async def prepare(self) -> None:
        """Called by :meth:`start` before the store opens (e.g. to load models)."""

    async def _before_serving(self) -> None:
        await self.prepare()
        self.store = self.store_class(self.database_path)

    def _serve_options(self) -> ServeOptions:
        return {"process_request": self._authorize}

    async def start(self) -> str:
        uri = await super().start()
        self.log.debug("%s listening on %s", self.label, uri)
        return uri

    async def stop(self) -> None:
        await super().stop()
        if self.store is not None:
            self.store.close()
            self.store = None

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        token = getattr(self.behaviour, "access_token", None)
        if not token:
            return None
        supplied = request.headers.get("Authorization")
        if supplied is None:
            return connection.respond(401, "missing bearer token\n")
        if supplied != f"Bearer {token}":
            return connection.respond(403, "invalid bearer token\n")
        return None

    def new_record(self, ws: ServerConnection) -> RecordT:
        """The record of one connection (appended to :attr:`sessions`)."""
        raise NotImplementedError

    async def _handle(self, ws: ServerConnection) -> None:
        record = self.new_record(ws)
        self.sessions.append(record)
        assert self.store is not None
        await self.connection_class(self, ws, record, self.store).run()
