"""The documents a bundle holds, as the frames read them: JSON objects (validated against their
artifact models when read), and the rows a frame is built from."""

from __future__ import annotations

from pydantic import JsonValue

#: a JSON document or one of its objects
JsonObject = dict[str, JsonValue]
#: one row of a frame: a column name and its cell
Row = dict[str, object]


def object_or_empty(value: JsonValue) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one (a field left out or null)."""
    return value if isinstance(value, dict) else {}


def objects_in(value: JsonValue) -> list[JsonObject]:
    """The JSON objects of ``value`` when it is a list (a field left out or null: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
