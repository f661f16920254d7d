"""The JSON the doubles exchange, named once: a message is a JSON object of JSON values."""

from __future__ import annotations

from pydantic import JsonValue

#: a JSON object as parsed (``json.loads``) or about to be sent
JsonObject = dict[str, JsonValue]
