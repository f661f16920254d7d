"""pipecat's WebSocket transport with protobuf frames (``adapter: pipecat``).

The frame codec (:mod:`._wire`) and its schema (``frames.proto``, declared in :mod:`._proto`)
stay private to this wire.
"""

from ._endpoint import PipecatEndpoint

__all__ = ["PipecatEndpoint"]
