"""A local Azure Speech text-to-speech REST server: deterministic tone speech of the SSML text."""

from ._server import AzureTtsServer, RecordedTtsRequest

__all__ = ["AzureTtsServer", "RecordedTtsRequest"]
