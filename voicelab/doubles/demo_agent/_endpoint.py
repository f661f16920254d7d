"""The local demo agent adapter (``adapter: local_agent``).

``connect()`` starts a :class:`LocalAgent` on 127.0.0.1 (ephemeral port) and reaches it through
the production WebSocket adapter, so the realistic credential-free demo exercises the real wire
protocol and real sockets, with real speech both ways (see
:mod:`voicelab.doubles.product`).
"""

from __future__ import annotations

from pydantic import BaseModel

from ...endpoints._abilities import EndpointSettings
from ...endpoints._protocol import EndpointContext
from ...endpoints._settings import parse_settings
from ...endpoints.websocket import WebSocketEndpoint
from ..product import ProductClientSettings, ProductEndpoint
from ._server import LocalAgent
from ._voice import LocalAgentBehaviour, require_speech_packages


class LocalAgentSettings(ProductClientSettings, LocalAgentBehaviour):
    """The agent's settings (see :class:`LocalAgentBehaviour`) plus the WebSocket client's."""

    behaviour_model = LocalAgentBehaviour


class LocalAgentEndpoint(ProductEndpoint):
    """The WebSocket adapter connected to its own embedded :class:`LocalAgent`.

    The agent's SQLite database outlives ``close()`` (the runner probes after closing);
    :meth:`outcome_probe` returns the probe bound to it.
    """

    capabilities = dict(WebSocketEndpoint.capabilities)
    settings_model = LocalAgentSettings
    product: LocalAgent

    def build_product(self, behaviour: BaseModel, context: EndpointContext) -> LocalAgent:
        assert isinstance(behaviour, LocalAgentBehaviour)  # what LocalAgentSettings holds
        return LocalAgent(behaviour, default_session_id=context.session_id,
                          base_dir=context.base_dir)

    @classmethod
    def check_settings(cls, settings: EndpointSettings) -> None:
        """The speech packages the agent speaks with (its default voice's too)."""
        parsed = parse_settings(LocalAgentSettings, settings)
        require_speech_packages(default_voice=parsed.model_path is None)

    @property
    def agent(self) -> LocalAgent:
        return self.product
