"""Plug-in settings (``endpoint.settings``, ``persona_settings``, ``speech_settings``...) checked
against a pydantic model: one place that turns a validation failure into a one-line error."""

from __future__ import annotations

import difflib
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
    setting lists the allowed ones and comes first: a typo (``databse``) also leaves the setting
    it meant missing, and "Field required" would name the key the user did write.
    """
    problems = error.errors(include_input=False, include_url=False)
    first = next((problem for problem in problems if problem.get("type") == "extra_forbidden"),
                 problems[0])
    # pydantic adds the tag of a union branch to the location: keep field names and indices
    location = format_key_path([part for part in first.get("loc", ())
                                if isinstance(part, int) or str(part).isidentifier()])
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        allowed = sorted(_fields_at(model, first.get("loc", ())[:-1]))
        guess = difflib.get_close_matches(str(first.get("loc", ("",))[-1]), allowed, n=1)
        meant = f"did you mean {guess[0]!r}? " if guess else ""
        message = f"unknown setting ({meant}allowed: {', '.join(allowed)})"
    full_key = ".".join(part for part in (key, location) if part) or None
    return ConfigError(message, source=source, key=full_key)


def _fields_at(model: type[BaseModel], location: tuple[object, ...]) -> list[str]:
    """The field names of the (nested) model at ``location``; the top model's when the path
    leads through something else (a list, a union)."""
    current: Any = model
    for part in location:
        field = current.model_fields.get(part) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return list(model.model_fields)
        current = annotation
    return list(current.model_fields)


def parse_settings(model: type[Model], settings: Mapping[str, object] | BaseModel | None, *,
                   key: str | None, source: str | Path | None = None) -> Model:
    """``settings`` validated against ``model`` (a model instance passes as it is: settings
    parsed once are never validated again; another model's instance is refused)."""
    if isinstance(settings, model):
        return settings
    if settings is not None and not isinstance(settings, Mapping):
        raise ConfigError(f"must be a mapping, got {type(settings).__name__}", source=source,
                          key=key)
    try:
        return model.model_validate(dict(settings or {}))
    except ValidationError as error:
        raise settings_error(error, model=model, key=key, source=source) from None
