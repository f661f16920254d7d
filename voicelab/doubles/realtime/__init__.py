"""A local server speaking the OpenAI Realtime / Azure Voice Live event protocol; see
``docs/realtime.md``."""

from ._config import RealtimeConnectionRecord, RealtimeServerConfig, RealtimeUsageCounts
from ._server import RealtimeServer

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
