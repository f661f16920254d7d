"""What several wires' codecs share: reading untrusted product messages field by field.

Protocol v1's own messages are in :mod:`.websocket._wire`; the realtime wire, the HTTP adapter
and the test doubles use these too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def parse_arguments(arguments: Any) -> tuple[Any, str | None]:
    """Tool-call arguments parsed from their JSON string when possible, plus the original string."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments), arguments
        except ValueError:
            return arguments, arguments
    return arguments, None


def field_mapping(message: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``message[key]`` when it is a mapping, else an empty one (product messages are
    untrusted: a field may be missing or of another type)."""
    value = message.get(key)
    return value if isinstance(value, Mapping) else {}
