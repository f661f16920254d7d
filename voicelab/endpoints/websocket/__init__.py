"""voicelab's own wire, protocol v1 over a WebSocket (``adapter: websocket``).

The adapter is exported so a product's own adapter (and the test doubles) can extend it; the
messages themselves are in :mod:`._wire`, shared with the doubles.
"""

from ._endpoint import WebSocketEndpoint, WebSocketSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
