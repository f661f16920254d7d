"""The local demo agent adapter (``adapter: local_agent``).

``connect()`` starts a :class:`LocalAgent` on 127.0.0.1 (ephemeral port) and reaches it through
the production WebSocket adapter, so the realistic credential-free demo exercises the real wire
protocol and real sockets, with real speech both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from ..endpoints._protocol import EndpointContext
from ..endpoints._settings import parse_settings
from ..endpoints._websocket import WebSocketEndpoint, WebSocketSettings
from ._server import AgentSessionRecord, LocalAgent
from ._store import LocalAgentProbe
from ._voice import BEHAVIOUR_FIELDS, LocalAgentBehaviour, require_speech_packages


class LocalAgentSettings(LocalAgentBehaviour):
    """The agent's settings (see :class:`LocalAgentBehaviour`) plus the WebSocket client's."""

    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout_seconds: Annotated[float, Field(gt=0)] = 5.0
    receive_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    chunk_ms: Annotated[float, Field(gt=0, le=2000)] = 100.0

    def behaviour(self) -> LocalAgentBehaviour:
        return LocalAgentBehaviour(**self.model_dump(include=set(BEHAVIOUR_FIELDS)))

    def client(self, uri: str) -> WebSocketSettings:
        return WebSocketSettings(
            uri=uri, headers=self.headers,
            connect_timeout_seconds=self.connect_timeout_seconds,
            receive_timeout_seconds=self.receive_timeout_seconds,
            max_message_bytes=self.max_message_bytes, chunk_ms=self.chunk_ms)


class LocalAgentEndpoint(WebSocketEndpoint):
    """The WebSocket adapter connected to its own embedded :class:`LocalAgent`.

    The agent's SQLite database outlives ``close()`` (the runner probes after closing);
    :meth:`outcome_probe` returns the probe bound to it.
    """

    capabilities = dict(WebSocketEndpoint.capabilities)

    def __init__(self, settings: Mapping[str, Any] | None, context: EndpointContext):
        self._agent_settings = parse_settings(LocalAgentSettings, settings)
        super().__init__(self._agent_settings.client("ws://127.0.0.1:0/"), context)
        self.agent = LocalAgent(self._agent_settings.behaviour(),
                                default_session_id=context.session_id,
                                base_dir=context.base_dir)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parsed = parse_settings(LocalAgentSettings, settings)
        require_speech_packages(default_voice=parsed.model_path is None)

    @property
    def session_record(self) -> AgentSessionRecord | None:
        """The agent's record of this adapter's connection (message order, what it heard)."""
        return self.agent.sessions[0] if self.agent.sessions else None

    def outcome_probe(self) -> LocalAgentProbe:
        return self.agent.outcome_probe()

    async def connect(self) -> None:
        if self._state != "new":
            await super().connect()  # raises already_connected
        self._uri = await self.agent.start()
        try:
            await super().connect()
        except BaseException:
            await self.agent.stop()
            raise

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self.agent.stop()
