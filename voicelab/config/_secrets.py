"""Secret sanitizing: nothing written, logged or hashed may contain a configured secret."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

MASK = "***"

_SECRET_NAME_TOKENS = frozenset({
    "token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
    "key", "apikey", "authorization", "cookie", "signature", "sas", "pat",
})
_SECRET_NAME_PHRASES = ("connection_string", "connectionstring", "conn_str", "private_key",
                        "client_secret", "access_key", "api_key")
_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SECRET_ENV_VAR = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY($|_)|APIKEY|CONNECTION_STRING|"
    r"CONN_STR|(^|_)PAT($|_)|(^|_)SAS($|_)|AUTHORIZATION|COOKIE)")

#: Secret values shorter than this are not scrubbed as substrings (they would mangle ordinary
#: text); the fields that hold them are still masked by name.
MIN_SCRUB_LENGTH = 4


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True for a field name like ``access_token``, ``apiKey``, ``Authorization`` or ``password``."""
    spaced = _CAMEL.sub("_", name).lower()
    if any(phrase in spaced for phrase in _SECRET_NAME_PHRASES):
        return True
    return any(token in _SECRET_NAME_TOKENS for token in _SPLIT.split(spaced) if token)


def is_secret_env_var(name: str) -> bool:
    return bool(_SECRET_ENV_VAR.search(name.upper()))


class SecretScrubber:
    """Masks secret-named fields and every known secret value, recursively.

    One instance per run holds the secret values the configuration interpolated or named, so
    raw endpoint events, logs and error messages can be scrubbed with the same rule.
    """

    def __init__(self, secret_values: Iterable[str] = ()):
        values = {v for v in secret_values if isinstance(v, str) and len(v) >= MIN_SCRUB_LENGTH}
        self.secret_values = frozenset(values)
        ordered = sorted(values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    def with_values(self, values: Iterable[str]) -> SecretScrubber:
        return SecretScrubber([*self.secret_values, *values])

    def scrub_text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def scrub(self, value: Any) -> Any:
        """A copy of ``value`` with secret-named fields masked and secret values replaced."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            cleaned: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str) and is_secret_name(key) and item not in (None, "", {}, []):
                    cleaned[key] = MASK if not isinstance(item, Mapping) else self.scrub(item)
                else:
                    cleaned[key] = self.scrub(item)
            return cleaned
        if isinstance(value, list | tuple):
            return [self.scrub(item) for item in value]
        return value


def collect_named_secrets(value: Any) -> set[str]:
    """Every string held under a secret-named field (so it can be scrubbed as a substring too)."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key):
                found.update(_strings(item))
            else:
                found.update(collect_named_secrets(item))
    elif isinstance(value, list | tuple):
        for item in value:
            found.update(collect_named_secrets(item))
    return found


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, Mapping):
        return {s for item in value.values() for s in _strings(item)}
    if isinstance(value, list | tuple):
        return {s for item in value for s in _strings(item)}
    return set()
