"""Endpoint adapters: the product's voice protocol behind one small interface."""

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

__all__ = [
    "CAPABILITY_KEYS",
    "ENDPOINTS",
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
    "ProductProcess",
    "check_capabilities",
    "check_launch",
    "declared_capabilities",
    "fill_placeholders",
    "load_endpoint_class",
    "missing_methods",
    "new_span_id",
    "new_trace_id",
    "pick_free_port",
    "uses_port",
]
