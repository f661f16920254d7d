"""pipecat's WebSocket transport with protobuf frames (``adapter: pipecat``).

The frame codec (:mod:`._wire`) and its schema (``frames.proto``, declared in :mod:`._proto`)
stay private to this wire.
"""

from ._endpoint import PipecatEndpoint

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
