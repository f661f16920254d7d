"""A local Azure Speech text-to-speech REST server: deterministic tone speech of the SSML text."""

from ._server import AzureTtsServer, RecordedTtsRequest

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
