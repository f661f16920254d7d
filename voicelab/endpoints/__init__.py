"""Endpoint adapters: the product's voice protocol behind one small interface."""

from ._inbox import Closure, ClosureError, MessageInbox, SocketClosed, closure_error
from ._loader import ENDPOINTS, check_capabilities, load_endpoint_class, missing_methods
from ._protocol import (
    CAPABILITY_KEYS,
    EVENT_TYPES,
    REQUIRED_METHODS,
    ConversationEndpoint,
    EndpointContext,
    EndpointError,
    EndpointEvent,
    declared_capabilities,
    new_span_id,
    new_trace_id,
)
from ._settings import AdapterSettings, auth_headers, parse_settings, redacted_url, secret_values
from ._socket import WebSocketConnection, open_websocket

__all__ = [
    "CAPABILITY_KEYS",
    "ENDPOINTS",
    "AdapterSettings",
    "Closure",
    "ClosureError",
    "EVENT_TYPES",
    "REQUIRED_METHODS",
    "ConversationEndpoint",
    "EndpointContext",
    "EndpointError",
    "EndpointEvent",
    "MessageInbox",
    "SocketClosed",
    "WebSocketConnection",
    "auth_headers",
    "check_capabilities",
    "closure_error",
    "declared_capabilities",
    "load_endpoint_class",
    "missing_methods",
    "new_span_id",
    "new_trace_id",
    "open_websocket",
    "parse_settings",
    "redacted_url",
    "secret_values",
]
