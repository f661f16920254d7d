"""One HTTP POST per user turn (``adapter: http``)."""

from ._endpoint import HttpEndpoint

__all__ = ["HttpEndpoint"]
