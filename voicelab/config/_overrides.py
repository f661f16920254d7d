"""``--set`` overrides, key paths, and blaming a validation error on the right file or argument."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from ._secrets import SecretScrubber, is_secret_name
from ._yaml import ExpansionError, safe_load

ModelT = TypeVar("ModelT", bound=BaseModel)

DOCUMENT_KINDS = ("scenario", "persona", "data", "script", "environment")


# --- key paths and error rendering ----------------------------------------------------------

def format_key_path(location: Sequence[object]) -> str:
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def _describe_error(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    location = error.get("loc", ())
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    # never echo a value held under a secret-named key (the message may reach a CI log)
    secret = any(isinstance(part, str) and is_secret_name(part) for part in location)
    if kind not in ("value_error", "assertion_error") and "input" in error and not secret:
        shown = repr(error["input"])
        if len(shown) <= 60:
            message += f" (got {shown})"
    return message


def validation_error_to_config_error(error: ValidationError, *, source: str | Path,
                                     overrides: Sequence[Override] = (),
                                     secret_values: Iterable[str] = ()) -> ConfigError:
    """The first problem of a pydantic error as one line, blamed on ``--set`` when it came from one."""
    problems = error.errors()
    first = problems[0]
    location = [part for part in first.get("loc", ()) if part != "__root__"]
    # pydantic adds the tag of a discriminated/union branch to the location; drop non-keys
    key = format_key_path(location)
    message = SecretScrubber(secret_values).scrub_text(_describe_error(first))
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    blamed: str | Path = source
    for override in overrides:
        if tuple(location[:len(override.path)]) == tuple(override.path) or (
                tuple(override.path[:len(location)]) == tuple(location) and location):
            blamed = override.source_for(source)
            break
    return ConfigError(message, source=blamed, key=key)


def validate_model(model: type[ModelT], data: object, *, source: str | Path,
                   overrides: Sequence[Override] = (),
                   secret_values: Iterable[str] = ()) -> ModelT:
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of keys, got {type(data).__name__}", source=source)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error_to_config_error(error, source=source, overrides=overrides,
                                               secret_values=secret_values) from None


# --- overrides ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Override:
    """One ``--set dotted.key=value``; ``document`` is ``run`` or one of DOCUMENT_KINDS."""

    label: str
    document: str
    path: tuple[str | int, ...]
    value: Any

    @classmethod
    def parse(cls, text: str) -> Override:
        label = f"--set {text}"
        key, sep, raw_value = text.partition("=")
        # list indices as error messages print them (turns[0].keywords) or dotted (turns.0)
        key = re.sub(r"\[(\d+)\]", r".\1", key.strip())
        if not sep or not key:
            raise ConfigError("expected KEY=VALUE", source=label)
        parts: list[str | int] = []
        for segment in key.split("."):
            if not segment:
                raise ConfigError(f"empty segment in key {key!r}", source=label)
            # a list index is a few ASCII digits: str.isdigit() also accepts '²', and int()
            # refuses both that and numbers of thousands of digits
            is_index = segment.isascii() and segment.isdigit() and len(segment) < 19
            parts.append(int(segment) if is_index else segment)
        try:
            value = safe_load(raw_value) if raw_value.strip() else ""
        except ExpansionError as error:
            raise ConfigError(f"value is not accepted: {error.problem}", source=label,
                              key=key) from None
        except yaml.YAMLError:
            raise ConfigError("value is not valid YAML", source=label, key=key) from None
        except (ValueError, TypeError, RecursionError) as error:  # e.g. 2001-02-30, huge ints
            raise ConfigError(f"value is not valid YAML: {error}", source=label, key=key) from None
        document = "run"
        if len(parts) > 1 and parts[0] in DOCUMENT_KINDS:
            document = str(parts[0])
            parts = parts[1:]
        return cls(label=label, document=document, path=tuple(parts), value=value)

    @property
    def text(self) -> str:
        """``key=value`` as given on the command line."""
        return self.label.removeprefix("--set ")

    @property
    def key(self) -> tuple[str, tuple[str | int, ...]]:
        """What the override sets: its document and key path (``turns[0]`` = ``turns.0``)."""
        return (self.document, self.path)

    def source_for(self, file: str | Path) -> str:
        """The error source of this override applied to ``file``: both the argument and the file."""
        return f"{self.label} ({Path(file).name})"


def apply_overrides(data: object, overrides: Sequence[Override], *,
                    file: str | Path | None = None) -> Any:
    for override in overrides:
        where = override.label if file is None else override.source_for(file)
        if not isinstance(data, dict):
            raise ConfigError("the document is not a mapping", source=where)
        node: Any = data
        for index, part in enumerate(override.path[:-1]):
            nxt = override.path[index + 1]
            if isinstance(node, list):
                if not isinstance(part, int) or part >= len(node):
                    raise ConfigError("list index out of range", source=where,
                                      key=format_key_path(override.path[:index + 1]))
                node = node[part]
                continue
            if not isinstance(node, dict):
                raise ConfigError("cannot set a key inside a non-mapping value",
                                  source=where, key=format_key_path(override.path[:index]))
            if part not in node or node[part] is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        last = override.path[-1]
        if isinstance(node, list):
            if not isinstance(last, int) or last >= len(node):
                raise ConfigError("list index out of range", source=where,
                                  key=format_key_path(override.path))
            node[last] = override.value
        elif isinstance(node, dict):
            node[last] = override.value
        else:
            raise ConfigError("cannot set a key inside a non-mapping value", source=where,
                              key=format_key_path(override.path[:-1]))
    return data
