"""A run loaded back from the resolved documents a bundle kept (``resolved-*.json``).

The documents are what the run executed with: every path already absolute, every secret already
masked (``***``). ``--set`` overrides apply to them exactly as to the files of a run (with
``${VAR}`` interpolation, so a secret can be given back without typing it), and every document
is validated by the same models. Asset files are not checked here: the caller decides which it
needs (a replay needs none).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import ConfigError
from ._environment import QUIET_ENVIRONMENT, EnvironmentConfig
from ._loader import Interpolation, interpolate
from ._overrides import Override, apply_overrides, validate_model
from ._persona import PersonaConfig, ScriptConfig
from ._resolved import LoadedRun
from ._run import RunConfig
from ._scenario import ScenarioConfig
from ._secrets import (
    SecretScrubber,
    collect_named_secrets,
    launch_secret_values,
    transport_secret_values,
)

#: The resolved documents of a bundle: ``settings`` is the run file.
RECORDED_KINDS = ("settings", "scenario", "persona", "data", "script", "environment")


def load_recorded_run(documents: Mapping[str, object], *, run_path: Path,
                      sources: Mapping[str, Path], overrides: Sequence[str | Override] = (),
                      environ: Mapping[str, str] | None = None) -> LoadedRun:
    """A :class:`LoadedRun` from resolved documents (``settings``, ``scenario``, ``persona``,
    ``data``, ``script`` or None, ``environment``); ``sources`` names the file of each (errors
    blame it), ``run_path`` is the run file the documents came from (its folder is the run's
    base folder: a launched product's working folder, custom plug-ins)."""
    environ = os.environ if environ is None else environ
    parsed = [o if isinstance(o, Override) else Override.parse(o) for o in overrides]
    by_document: dict[str, list[Override]] = {}
    for override in parsed:
        by_document.setdefault("settings" if override.document == "run" else override.document,
                               []).append(override)
    secret_values: set[str] = set()
    secret_keys: dict[str, frozenset[str]] = {}
    prepared: dict[str, tuple[Any, list[Override]]] = {}
    for kind in RECORDED_KINDS:
        data = documents.get(kind)
        kind_overrides = by_document.get(kind, [])
        if data is None:
            if kind_overrides:
                raise ConfigError(f"the run has no {kind} to override",
                                  source=kind_overrides[0].label)
            continue
        record = Interpolation()
        kind_overrides = [replace(o, value=interpolate(o.value, source=o.label, environ=environ,
                                                       record=record, location=o.path))
                          for o in kind_overrides]
        data = apply_overrides(copy.deepcopy(data), kind_overrides, file=sources[kind])
        secret_values |= record.secret_values | collect_named_secrets(data)
        secret_keys["run" if kind == "settings" else kind] = frozenset(record.secret_keys)
        prepared[kind] = (data, kind_overrides)
    settings = prepared.get("settings")
    if settings is None:
        raise ConfigError("the bundle keeps no run settings", source=sources["settings"])
    secret_values |= transport_secret_values(settings[0]) | launch_secret_values(settings[0])

    def validated(model: type[BaseModel], kind: str) -> Any:
        data, kind_overrides = prepared[kind]
        return validate_model(model, data, source=sources[kind], overrides=kind_overrides,
                              secret_values=secret_values)

    for kind in ("scenario", "persona"):
        if kind not in prepared:
            raise ConfigError(f"the bundle keeps no {kind}", source=sources[kind])
    data = prepared["data"][0] if "data" in prepared else {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of keys, got {type(data).__name__}",
                          source=sources["data"])
    return LoadedRun(
        run_path=run_path, run=validated(RunConfig, "settings"),
        scenario=validated(ScenarioConfig, "scenario"),
        persona=validated(PersonaConfig, "persona"), data=dict(data),
        script=validated(ScriptConfig, "script") if "script" in prepared else None,
        environment=validated(EnvironmentConfig, "environment") if "environment" in prepared
        else QUIET_ENVIRONMENT,
        sources={("run" if kind == "settings" else kind): Path(sources[kind])
                 for kind in prepared},
        scrubber=SecretScrubber(secret_values), secret_keys=secret_keys)
