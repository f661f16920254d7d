"""Endpoint adapters: the product's voice protocol behind one small interface."""

from ._inbox import Closure, ClosureError, MessageInbox, SocketClosed, closure_error
from ._launch import (
    MAX_LINE_BYTES,
    MAX_LOG_BYTES,
    MAX_LOG_LINES,
    LogLine,
    ProductProcess,
    check_launch,
    fill_placeholders,
    pick_free_port,
    uses_port,
)
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
    "MAX_LINE_BYTES",
    "MAX_LOG_BYTES",
    "MAX_LOG_LINES",
    "REQUIRED_METHODS",
    "ConversationEndpoint",
    "EndpointContext",
    "EndpointError",
    "EndpointEvent",
    "LogLine",
    "MessageInbox",
    "ProductProcess",
    "SocketClosed",
    "WebSocketConnection",
    "auth_headers",
    "check_capabilities",
    "check_launch",
    "closure_error",
    "declared_capabilities",
    "fill_placeholders",
    "load_endpoint_class",
    "missing_methods",
    "new_span_id",
    "new_trace_id",
    "open_websocket",
    "parse_settings",
    "pick_free_port",
    "redacted_url",
    "secret_values",
    "uses_port",
]
