"""Adapter settings: small strict pydantic models, errors as one-line ``ConfigError``s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, model_validator

from ..config import parse_settings as parse_model_settings
from ..config import spelled_for, url_secret_values

KEY_PREFIX = "endpoint.settings"

Model = TypeVar("Model", bound=BaseModel)


class AdapterSettings(BaseModel):
    """Base of every built-in adapter's settings: a typo is an error, values are immutable;
    voicelab's ``turn_taking`` is read under either spelling, as the model names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _turn_taking_spelling(cls, data: object) -> object:
        return spelled_for(cls.model_fields, data) if isinstance(data, Mapping) else data


def parse_settings(model: type[Model], settings: Mapping[str, Any] | BaseModel | None) -> Model:
    """``settings`` validated against ``model``; a failure raises :class:`ConfigError` keyed
    ``endpoint.settings.<field>`` that never repeats the offending value (it may be a secret)."""
    return parse_model_settings(model, settings, key=KEY_PREFIX)


def redacted_url(url: str) -> str:
    """``scheme://host:port/path`` without user info, query or fragment (they may hold tokens)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid url>"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def auth_headers(headers: Mapping[str, str], access_token: str | None,
                 traceparent: str) -> dict[str, str]:
    """The configured headers plus ``traceparent`` and, with a token, ``Authorization: Bearer``."""
    merged = dict(headers)
    merged["traceparent"] = traceparent
    if access_token:
        merged["Authorization"] = f"Bearer {access_token}"
    return merged


def secret_values(headers: Mapping[str, str], access_token: str | None, *,
                  uri: str | None = None) -> list[str]:
    """Values to scrub from raw events, logs and errors: the token, every header value and the
    user info and query values of ``uri`` (``?sig=...``, ``user:pass@``).

    A run loaded from files already scrubs all of these (``load_run`` collects them); this
    covers an adapter built directly, e.g. in a notebook.
    """
    values = [value for value in headers.values() if value]
    if access_token:
        values += [access_token, f"Bearer {access_token}"]
    if uri:
        values += sorted(url_secret_values(uri))
    return values
