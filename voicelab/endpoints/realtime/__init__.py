"""The realtime WebSocket protocol (OpenAI Realtime API, Azure Voice Live), shared by the
``realtime`` endpoint adapter, the realtime persona and the ``voice_live`` speech provider.

:mod:`voicelab.endpoints.realtime.wire` builds and reads the protocol's messages (pure, no sockets);
:class:`RealtimeConnection` is one connection whose receive path only timestamps and enqueues.
The connection lives with the wire, under ``endpoints/``, because personas and speech already
build on ``endpoints`` (never the reverse): both reach it through this package's names.
"""

from . import wire
from ._connection import Closure, RealtimeConnection
from ._endpoint import RealtimeEndpoint

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
