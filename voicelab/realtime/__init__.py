"""The realtime WebSocket protocol (OpenAI Realtime API, Azure Voice Live), shared by the
``realtime`` endpoint adapter, the realtime persona and the ``voice_live`` speech provider.

:mod:`voicelab.realtime.wire` builds and reads the protocol's messages (pure, no sockets);
:class:`RealtimeConnection` is one connection whose receive path only timestamps and enqueues.
"""

from . import wire
from ._connection import Closure, RealtimeConnection

__all__ = ["Closure", "RealtimeConnection", "wire"]
