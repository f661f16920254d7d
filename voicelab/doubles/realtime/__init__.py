"""A local server speaking the OpenAI Realtime / Azure Voice Live event protocol; see
``docs/realtime.md``."""

from ._server import (
    RealtimeConnectionRecord,
    RealtimeServer,
    RealtimeServerConfig,
    RealtimeUsageCounts,
)

__all__ = ["RealtimeConnectionRecord", "RealtimeServer", "RealtimeServerConfig",
           "RealtimeUsageCounts"]
