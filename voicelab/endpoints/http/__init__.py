"""One HTTP POST per user turn (``adapter: http``)."""

from ._endpoint import HttpEndpoint

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
