"""The ``{port}`` placeholder of a launched product: where it is written, filled and checked.

A launch may leave the port to voicelab (``{port}`` in the command, the environment or the
endpoint settings); the same free port is then filled into all three before the product starts,
and validation refuses settings that use it when the product is never told it.
"""

from __future__ import annotations

import re
import socket
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..config import LaunchConfig
from ..errors import ConfigError
from ._protocol import EndpointError

_PLACEHOLDER = re.compile(r"\{\{port\}\}|\{port\}")
_recent_ports: deque[int] = deque(maxlen=256)


def uses_port(value: object) -> bool:
    """True when a string anywhere in ``value`` holds ``{port}`` (``{{port}}`` is an escape)."""
    if isinstance(value, str):
        return any(match.group(0) == "{port}" for match in _PLACEHOLDER.finditer(value))
    if isinstance(value, Mapping):
        return any(uses_port(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(uses_port(item) for item in value)
    return False


def fill_placeholders(value: object, port: int | None) -> Any:
    """A copy of ``value`` with ``{port}`` replaced by ``port`` in every string of any nested
    mapping or list (keys untouched) and ``{{port}}`` by a literal ``{port}``."""
    if isinstance(value, str):
        def substitute(match: re.Match[str]) -> str:
            if match.group(0) != "{port}":
                return "{port}"
            if port is None:
                raise ValueError("'{port}' needs a port to fill in")
            return str(port)

        return _PLACEHOLDER.sub(substitute, value)
    if isinstance(value, Mapping):
        return {key: fill_placeholders(item, port) for key, item in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(item, port) for item in value]
    if isinstance(value, tuple):
        return tuple(fill_placeholders(item, port) for item in value)
    return value


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing is bound to on ``host`` now, not handed out recently by this process
    (so concurrent launches do not get the same one). Another program may still take it before
    the product binds it: the product then fails to start, and says why on stderr."""
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port not in _recent_ports:
            _recent_ports.append(port)
            return port
    raise EndpointError(f"found no free TCP port on {host}", code="launch_failed")


def check_launch(launch: LaunchConfig, settings: Mapping[str, object] | None = None) -> None:
    """Refuse endpoint settings that use ``{port}`` when the product is never told the port."""
    if uses_port(settings or {}) and not (uses_port(launch.command) or uses_port(launch.env)):
        raise ConfigError("endpoint.settings use '{port}' but neither the command nor an env "
                          "value passes it to the product", key="endpoint.launch.command")
