"""Plug-in settings (``endpoint.settings``, ``persona_settings``, ``speech_settings``...) checked
against a pydantic model: one place that turns a validation failure into a one-line error."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from ._overrides import format_key_path

Model = TypeVar("Model", bound=BaseModel)


def settings_error(error: ValidationError, *, model: type[BaseModel], key: str | None,
                   source: str | Path | None = None) -> ConfigError:
    """The first problem of ``error`` as a :class:`ConfigError` keyed ``<key>.<field>``.

    The message never repeats the offending value (settings may hold secrets); an unknown
    setting lists the allowed ones."""
    first = error.errors(include_input=False, include_url=False)[0]
    # pydantic adds the tag of a union branch to the location: keep field names and indices
    location = format_key_path([part for part in first.get("loc", ())
                                if isinstance(part, int) or str(part).isidentifier()])
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = f"unknown setting (allowed: {', '.join(sorted(model.model_fields))})"
    full_key = ".".join(part for part in (key, location) if part) or None
    return ConfigError(message, source=source, key=full_key)


def parse_settings(model: type[Model], settings: Mapping[str, Any] | Model | None, *,
                   key: str | None, source: str | Path | None = None) -> Model:
    """``settings`` validated against ``model`` (a model instance passes as it is)."""
    if isinstance(settings, model):
        return settings
    if settings is not None and not isinstance(settings, Mapping):
        raise ConfigError(f"must be a mapping, got {type(settings).__name__}", source=source,
                          key=key)
    try:
        return model.model_validate(dict(settings or {}))
    except ValidationError as error:
        raise settings_error(error, model=model, key=key, source=source) from None
