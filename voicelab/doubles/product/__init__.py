"""A protocol-v1 voice product on 127.0.0.1: the shared server base and the scripted fake.

The base (:class:`ProductServer`, :class:`ProductConnection`, :class:`ProductStore`,
:class:`ProductProbe`, :class:`ProductEndpoint`) is a real WebSocket server with the strict
protocol state machine, a SQLite store, its outcome probe, an adapter that embeds it and the
standalone entry. Two products are built on it: :class:`FakeProduct` here (scripted replies and
injectable faults; ``adapter: fake``, ``python -m voicelab.doubles.product``) and the local demo
agent (:mod:`voicelab.doubles.demo_agent`). :class:`FakeHttpProduct` plays the same example for
the HTTP adapter. See ``docs/protocol.md``.
"""

from ._connection import ClosedByProduct, ProductConnection, ServerTiming
from ._endpoint import ProductClientSettings, ProductEndpoint
from ._fake_behaviour import FakeBehaviour
from ._fake_endpoint import FakeEndpointSettings, FakeProductEndpoint
from ._fake_http import FakeHttpBehaviour, FakeHttpProduct
from ._fake_server import FakeProduct, FakeSessionRecord
from ._fake_store import FakeProductProbe
from ._main import serve_product_main
from ._server import ProductServer
from ._store import ProductDatabaseDir, ProductProbe, ProductStore

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "FakeProduct",
]
