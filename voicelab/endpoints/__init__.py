"""Endpoint adapters: the product's voice protocol behind one small interface."""

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
    "REQUIRED_METHODS",
    "ConversationEndpoint",
    "EndpointContext",
    "EndpointError",
    "EndpointEvent",
    "check_capabilities",
    "declared_capabilities",
    "load_endpoint_class",
    "missing_methods",
    "new_span_id",
    "new_trace_id",
]
