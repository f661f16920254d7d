"""Resolving ``endpoint.adapter`` to a class and checking it against the protocol."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._registry import Registry
from ..errors import ConfigError
from ._abilities import abilities_of
from ._protocol import REQUIRED_METHODS

#: The endpoint adapters by name (``endpoint.adapter``): built-ins, then plug-ins'
#: ``voicelab.adapters`` entry points.
ENDPOINTS = Registry("endpoint adapter", group="voicelab.adapters", builtins={
    "fake": "voicelab.doubles.product:FakeProductEndpoint",
    "websocket": "voicelab.endpoints.websocket:WebSocketEndpoint",
    "http": "voicelab.endpoints.http:HttpEndpoint",
    "realtime": "voicelab.endpoints.realtime:RealtimeEndpoint",
    "twilio": "voicelab.endpoints.twilio:TwilioEndpoint",
    "local_agent": "voicelab.doubles.demo_agent:LocalAgentEndpoint",
    "pipecat": "voicelab.endpoints.pipecat:PipecatEndpoint",
    "sip": "voicelab.endpoints.sip:SipEndpoint",
    "webrtc": "voicelab.endpoints.webrtc:WebRtcEndpoint",
})


def missing_methods(candidate: object, methods: Sequence[str]) -> list[str]:
    """Which of ``methods`` (names the caller chooses: each plug-in kind has its own list)
    ``candidate`` lacks."""
    return [name for name in methods if not callable(getattr(candidate, name, None))]


def load_endpoint_class(name: str, *, search_dirs: Iterable[Path] = (), source: str | Path | None = None,
                        key: str = "endpoint.adapter") -> type:
    """The adapter class for ``name``, checked to have the protocol's methods, capabilities and
    (when it declares one) a pydantic settings model."""
    adapter = ENDPOINTS.resolve(name, search_dirs=search_dirs, source=source, key=key)
    if not inspect.isclass(adapter):
        raise ConfigError(f"{name!r} is not a class", source=source, key=key)
    missing = missing_methods(adapter, REQUIRED_METHODS)
    if missing:
        raise ConfigError(f"{name!r} does not implement the ConversationEndpoint protocol: "
                          f"missing {', '.join(missing)}", source=source, key=key)
    abilities = abilities_of(adapter)
    for problem in (abilities.capabilities_problem, abilities.settings_model_problem):
        if problem is not None:
            raise ConfigError(f"{name!r}: {problem}", source=source, key=key)
    return adapter


def check_capabilities(adapter: type, required: Sequence[str], *, adapter_name: str,
                       source: str | Path | None, key: str = "conversation.required_capabilities") -> None:
    capabilities = abilities_of(adapter).capabilities
    lacking = [name for name in required if not capabilities.get(name, False)]
    if lacking:
        raise ConfigError(f"adapter {adapter_name!r} does not provide {', '.join(lacking)}",
                          source=source, key=key)
