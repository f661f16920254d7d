"""The JSON the doubles exchange, named once: a message is a JSON object of JSON values."""

from __future__ import annotations

from pydantic import JsonValue

#: a JSON object as parsed (``json.loads``) or about to be sent
JsonObject = dict[str, JsonValue]


def object_or_empty(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a field left out, null or of
    another type reads as an object without fields)."""
    return value if isinstance(value, dict) else {}
