"""The embedded fake product adapter (``adapter: fake``).

``connect()`` starts a :class:`FakeProduct` on 127.0.0.1 (ephemeral port) and reaches it through
the production WebSocket adapter, so the credential-free CI path still exercises the real wire
protocol, the strict ``evaluator.init`` handshake and real sockets (see :mod:`._endpoint`).
"""

from __future__ import annotations

from ...endpoints._protocol import EndpointContext
from ...endpoints.websocket import WebSocketEndpoint
from ._endpoint import ProductClientSettings, ProductEndpoint
from ._fake_behaviour import FakeBehaviour
from ._fake_server import FakeProduct


class FakeEndpointSettings(ProductClientSettings, FakeBehaviour):
    """The fake's behaviour (see :class:`FakeBehaviour`) plus the WebSocket client's settings.

    ``access_token`` is both required by the fake and sent by the client.
    """

    behaviour_model = FakeBehaviour


class FakeProductEndpoint(ProductEndpoint):
    """The WebSocket adapter connected to its own embedded :class:`FakeProduct`.

    The fake's SQLite database outlives ``close()`` (the runner probes after closing);
    :meth:`outcome_probe` returns the probe bound to it.
    """

    capabilities = dict(WebSocketEndpoint.capabilities)
    settings_model = FakeEndpointSettings
    product: FakeProduct

    def build_product(self, behaviour: FakeBehaviour, context: EndpointContext) -> FakeProduct:
        return FakeProduct(behaviour, default_session_id=context.session_id)
