"""Endpoint adapters: the product's voice protocol behind one small interface."""

from ._abilities import (
    AdapterAbilities,
    ChecksAdapterSettings,
    DeclaresCapabilities,
    DeclaresConversionDelay,
    DeclaresSettingsModel,
    DeclaresTurnTaking,
    DeclaresWireCodec,
    EndpointSettings,
    ExposesSettings,
    HasOutcomeProbe,
    LineChunkSettings,
    ReportsArrivalStamps,
    ReportsCallSetup,
    ReportsDeparture,
    ReportsProductCanSpeakFirst,
    ReportsReceiveBacklog,
    SendsDtmf,
    abilities_of,
    declared_capabilities,
    line_chunk_ms_of,
    turn_taking_of,
)
from ._fields import field_mapping, parse_arguments
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
from ._limits import InboundBudget, InboundLimits, limit_error
from ._loader import ENDPOINTS, check_capabilities, load_endpoint_class, missing_methods
from ._protocol import (
    CAPABILITY_KEYS,
    EVENT_TYPES,
    REQUIRED_METHODS,
    TURN_TAKING_MODES,
    ConversationEndpoint,
    EndpointContext,
    EndpointError,
    EndpointEvent,
    Playback,
    new_span_id,
    new_trace_id,
)
from ._settings import AdapterSettings, auth_headers, parse_settings, redacted_url, secret_values
from ._socket import WebSocketConnection
from ._socket_open import open_websocket

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "AdapterAbilities",
    "ChecksAdapterSettings",
    "DeclaresCapabilities",
    "DeclaresConversionDelay",
    "DeclaresSettingsModel",
    "DeclaresTurnTaking",
    "DeclaresWireCodec",
    "EndpointSettings",
    "ExposesSettings",
    "HasOutcomeProbe",
    "LineChunkSettings",
    "ReportsProductCanSpeakFirst",
    "SendsDtmf",
    "abilities_of",
    "ENDPOINTS",
    "ConversationEndpoint",
    "EndpointContext",
    "EndpointError",
    "EndpointEvent",
]
