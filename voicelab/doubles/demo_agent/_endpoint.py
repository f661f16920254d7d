"""The local demo agent adapter (``adapter: local_agent``).

``connect()`` starts a :class:`LocalAgent` on 127.0.0.1 (ephemeral port) and reaches it through
the production WebSocket adapter, so the realistic credential-free demo exercises the real wire
protocol and real sockets, with real speech both ways (see
:mod:`voicelab.doubles.product`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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

    def build_product(self, behaviour: LocalAgentBehaviour,
                      context: EndpointContext) -> LocalAgent:
        return LocalAgent(behaviour, default_session_id=context.session_id,
                          base_dir=context.base_dir)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        parsed = parse_settings(LocalAgentSettings, settings)
        require_speech_packages(default_voice=parsed.model_path is None)

    @property
    def agent(self) -> LocalAgent:
        return self.product
