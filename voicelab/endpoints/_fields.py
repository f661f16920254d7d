"""What several wires' codecs share: reading untrusted product messages field by field.

Protocol v1's own messages are in :mod:`.websocket._wire`; the realtime wire, the HTTP adapter
and the test doubles use these too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import JsonValue, TypeAdapter, ValidationError

#: a JSON object as a wire carries it (parsed, or to be serialized)
JsonObject = dict[str, JsonValue]
_JSON_OBJECT: TypeAdapter[JsonObject] = TypeAdapter(JsonObject)


def json_object(value: Mapping[str, object], *, what: str) -> JsonObject:
    """``value`` checked to be JSON all the way down (what a wire is about to serialize: a
    session built from settings and code); ``ValueError`` naming ``what`` when it is not."""
    try:
        return _JSON_OBJECT.validate_python(value)
    except ValidationError as error:
        problem = error.errors()[0]
        # JsonValue's union names the branch it tried ("list", "dict") in the location too
        where = ".".join(str(part) for part in problem["loc"] if part not in ("list", "dict"))
        raise ValueError(f"{what} is not JSON at {where or 'top level'}: {problem['msg']}"
                         ) from None


def parse_arguments(arguments: object) -> tuple[object, str | None]:
    """Tool-call arguments parsed from their JSON string when possible, plus the original string."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments), arguments
        except ValueError:
            return arguments, arguments
    return arguments, None


def field_mapping(message: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``message[key]`` when it is a mapping, else an empty one (product messages are
    untrusted: a field may be missing or of another type)."""
    value = message.get(key)
    return value if isinstance(value, Mapping) else {}
