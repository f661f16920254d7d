"""Loading a run: YAML files, ``${VAR}`` interpolation, ``--set`` overrides, path resolution.

Every failure raises :class:`~voicelab.errors.ConfigError` naming the file (or the ``--set``
argument) and the key path, never a raw pydantic or YAML dump.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .._location import as_local_path, is_url
from ..errors import ConfigError
from ._cost import PricingConfig
from ._environment import QUIET_ENVIRONMENT, EnvironmentConfig
from ._overrides import (
    Override,
    apply_overrides,
    format_key_path,
    validate_model,
)
from ._persona import PersonaConfig, ScriptConfig
from ._resolved import LoadedRun
from ._run import RunConfig
from ._scenario import ScenarioConfig
from ._secrets import (
    SecretScrubber,
    collect_named_secrets,
    is_secret_env_var,
    launch_secret_values,
    transport_secret_values,
)
from ._yaml import ExpansionError, not_a_regular_file, read_config_text, safe_load

_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


# --- YAML and interpolation -----------------------------------------------------------------

def read_yaml(path: Path, *, key: str | None = None, referrer: str | Path | None = None) -> Any:
    """Parse one YAML file; a missing file is blamed on the file and key that named it.

    The file size and the document's alias expansion are bounded (see :mod:`._yaml`).
    """
    text = read_config_text(path, key=key, referrer=referrer)
    try:
        return safe_load(text)
    except ExpansionError as error:
        raise ConfigError(error.problem, source=path, key=error.key_path or None) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = error.problem or error.context or "invalid YAML"
        raise ConfigError(f"YAML syntax error at {where}{problem}", source=path) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"YAML syntax error: {error}", source=path) from None
    except (ValueError, TypeError, RecursionError) as error:  # e.g. absurd timestamps
        raise ConfigError(f"YAML value error: {error}", source=path) from None


@dataclass
class Interpolation:
    secret_values: set[str] = field(default_factory=set)
    secret_keys: set[str] = field(default_factory=set)


def interpolate(value: object, *, source: str | Path, environ: Mapping[str, str],
                record: Interpolation, location: tuple[object, ...] = ()) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string; ``$$`` is a literal ``$``."""
    if isinstance(value, str):
        if "$" not in value:
            return value

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            name, default = match.group(1), match.group(2)
            if name in environ:
                resolved = environ[name]
            elif default is not None:
                resolved = default
            else:
                raise ConfigError(f"environment variable {name} is not set", source=source,
                                  key=format_key_path(location) or None)
            if is_secret_env_var(name) and resolved:
                record.secret_values.add(resolved)
                record.secret_keys.add(format_key_path(location))
            return resolved

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, Mapping):
        return {key: interpolate(item, source=source, environ=environ, record=record,
                                 location=(*location, key))
                for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, source=source, environ=environ, record=record,
                            location=(*location, index))
                for index, item in enumerate(value)]
    return value


# --- documents ------------------------------------------------------------------------------

@dataclass
class RawDocument:
    """One YAML file after interpolation and overrides, before validation."""

    path: Path
    data: Any
    overrides: list[Override]
    interpolation: Interpolation


def read_document(path: Path, *, environ: Mapping[str, str], overrides: Sequence[Override] = (),
                  key: str | None = None, referrer: str | Path | None = None,
                  allow_empty: bool = False) -> RawDocument:
    data = read_yaml(path, key=key, referrer=referrer)
    if data is None:
        if not allow_empty:
            raise ConfigError("the file is empty", source=path)
        data = {}
    record = Interpolation()
    data = interpolate(data, source=path, environ=environ, record=record)
    # --set values take ${VAR} too, so a secret never has to be typed on a command line
    overrides = [replace(o, value=interpolate(o.value, source=o.label, environ=environ,
                                              record=record, location=o.path))
                 for o in overrides]
    data = apply_overrides(data, overrides, file=path)
    return RawDocument(path=path, data=data, overrides=list(overrides), interpolation=record)


def resolve_relative(base_file: Path, value: Path | None) -> Path | None:
    if value is None:
        return None
    expanded = Path(os.path.expanduser(str(value)))
    if expanded.is_absolute():
        return expanded
    joined = base_file.parent / expanded
    try:
        return joined.resolve()
    except (OSError, ValueError):  # e.g. a NUL in the path: reading it reports the problem
        return Path(os.path.abspath(joined))


def resolve_location(base_file: Path, value: str | Path) -> str | Path:
    """An artifacts location: a store URL as written (``s3://bucket/runs``), else a folder
    relative to ``base_file`` (``file://`` URLs included)."""
    if is_url(value):
        return str(value)
    resolved = resolve_relative(base_file, as_local_path(value))
    assert resolved is not None
    return resolved


def require_file(path: Path, *, source: str | Path, key: str) -> None:
    try:
        exists = path.exists()
    except (OSError, ValueError) as error:  # e.g. a name too long for the file system
        raise ConfigError(f"cannot access {path}: {error}", source=source, key=key) from None
    if not exists:
        raise ConfigError(f"file not found: {path}", source=source, key=key)
    kind = not_a_regular_file(path)
    if kind:
        raise ConfigError(f"expected a file, found {kind}: {path}", source=source, key=key)


def _resolve_environment_paths(environment: EnvironmentConfig, path: Path) -> EnvironmentConfig:
    events = [event.model_copy(update={"type": resolve_relative(path, event.type)})
              for event in environment.transient_events]
    probes = [probe.model_copy(update={"sound": resolve_relative(path, probe.sound)})
              for probe in environment.noise_probes]
    return environment.model_copy(update={
        "base_noise": resolve_relative(path, environment.base_noise),
        "background_voices": resolve_relative(path, environment.background_voices),
        "transient_events": events,
        "noise_probes": probes,
    })


def load_environment(path: str | Path, *, overrides: Sequence[str | Override] = (),
                     environ: Mapping[str, str] | None = None) -> EnvironmentConfig:
    """Load one environment file on its own (paths resolved, assets checked to exist)."""
    path = Path(path).resolve()
    parsed = [o if isinstance(o, Override) else Override.parse(o) for o in overrides]
    raw = read_document(path, environ=os.environ if environ is None else environ, overrides=parsed)
    environment = validate_model(EnvironmentConfig, raw.data, source=path, overrides=parsed,
                                 secret_values=raw.interpolation.secret_values)
    environment = _resolve_environment_paths(environment, path)
    for key, asset in environment.asset_paths():
        require_file(asset, source=path, key=key)
    return environment


def load_pricing(path: str | Path, *, referrer: str | Path | None = None,
                 key: str | None = None) -> PricingConfig:
    """A price table file (``pricing_path``): the ``pricing:`` block's content, or a document
    holding a ``pricing:`` key (a run or suite file's block copied out as it is)."""
    path = Path(path).expanduser().resolve()
    require_file(path, source=referrer or path, key=key or "pricing_path")
    data = read_yaml(path, key=key, referrer=referrer)
    if isinstance(data, Mapping) and set(data) == {"pricing"}:
        data = data["pricing"]
    return validate_model(PricingConfig, data, source=path)


def load_run(path: str | Path, *, overrides: Sequence[str | Override] = (),
             environ: Mapping[str, str] | None = None) -> LoadedRun:
    """Load and validate a run file and every file it references.

    ``overrides`` are ``dotted.key=value`` strings (``--set``); a first segment naming a document
    (``scenario.``, ``persona.``, ``data.``, ``script.``, ``environment.``) targets that file.
    Nothing here opens a network connection or decodes audio.
    """
    environ = os.environ if environ is None else environ
    run_path = Path(path).expanduser().resolve()
    parsed = [o if isinstance(o, Override) else Override.parse(o) for o in overrides]
    by_document: dict[str, list[Override]] = {}
    for override in parsed:
        by_document.setdefault(override.document, []).append(override)

    raw_run = read_document(run_path, environ=environ, overrides=by_document.get("run", []))
    references = _References(run_path=run_path, environ=environ, by_document=by_document,
                             secret_values=_run_secret_values(raw_run),
                             secret_keys={"run": frozenset(raw_run.interpolation.secret_keys)},
                             sources={"run": run_path})
    run = _run_settings(raw_run, by_document.get("run", []),
                        secret_values=references.secret_values)
    raw_scenario = references.read("scenario", run.scenario_path, required=True)
    raw_persona = references.read("persona", run.persona_path, required=True)
    raw_data = references.read("data", run.data_path, required=False)
    raw_script = references.read("script", run.script_path, required=False)
    raw_environment = references.read("environment", run.environment_path, required=False)
    assert raw_scenario is not None and raw_persona is not None

    secret_values = references.secret_values
    scenario = validate_model(ScenarioConfig, raw_scenario.data, source=raw_scenario.path,
                              overrides=raw_scenario.overrides, secret_values=secret_values)
    persona = validate_model(PersonaConfig, raw_persona.data, source=raw_persona.path,
                             overrides=raw_persona.overrides, secret_values=secret_values)
    loaded = LoadedRun(
        run_path=run_path, run=run, scenario=scenario, persona=persona,
        data=_data_of(raw_data), script=_script_of(raw_script, secret_values),
        environment=_environment_of(raw_environment, secret_values),
        sources=references.sources, scrubber=SecretScrubber(secret_values),
        secret_keys=references.secret_keys, overrides=tuple(o.text for o in parsed))
    for document, key, asset in loaded.asset_paths():
        require_file(asset, source=document, key=key)
    return loaded


def _run_secret_values(raw_run: RawDocument) -> set[str]:
    """The secrets a run file holds: interpolated from secret variables, under secret names,
    in transport headers and URL credentials, and in its launch command and environment."""
    secret_values = set(raw_run.interpolation.secret_values)
    secret_values |= collect_named_secrets(raw_run.data)
    secret_values |= transport_secret_values(raw_run.data)  # header values, URL credentials
    secret_values |= launch_secret_values(raw_run.data)  # --token VALUE, declared env secrets
    return secret_values


def _run_settings(raw_run: RawDocument, overrides: list[Override], *,
                  secret_values: set[str]) -> RunConfig:
    """The run file validated, its paths resolved against it and its price table read in."""
    run_path = raw_run.path
    run = validate_model(RunConfig, raw_run.data, source=run_path, overrides=overrides,
                         secret_values=secret_values)
    given = {"scenario_path": run.scenario_path, "persona_path": run.persona_path,
             "data_path": run.data_path, "script_path": run.script_path,
             "environment_path": run.environment_path}
    run = run.model_copy(update={name: resolve_relative(run_path, value)
                                 for name, value in given.items()}
                         | {"artifacts_dir": resolve_location(run_path, run.artifacts_dir)})
    if run.pricing_path is not None:
        # the table itself is what the bundle keeps (resolved-settings.json) and prices by
        pricing_path = resolve_relative(run_path, run.pricing_path)
        assert pricing_path is not None
        run = run.model_copy(update={"pricing_path": None, "pricing": load_pricing(
            pricing_path, referrer=run_path, key="pricing_path")})
    return run


@dataclass
class _References:
    """The documents a run file references, read one by one; each adds its file to
    ``sources`` and its secrets to ``secret_values`` and ``secret_keys``."""

    run_path: Path
    environ: Mapping[str, str]
    by_document: dict[str, list[Override]]
    secret_values: set[str]
    secret_keys: dict[str, frozenset[str]]
    sources: dict[str, Path]

    def read(self, kind: str, file: Path | None, *, required: bool) -> RawDocument | None:
        if file is None:
            if kind in self.by_document:
                first = self.by_document[kind][0]
                raise ConfigError(f"the run has no {kind}_path to override",
                                  source=first.source_for(self.run_path))
            if required:
                raise ConfigError("required key is missing", source=self.run_path,
                                  key=f"{kind}_path")
            return None
        raw = read_document(file, environ=self.environ, overrides=self.by_document.get(kind, []),
                            key=f"{kind}_path", referrer=self.run_path,
                            allow_empty=(kind == "data"))
        self.sources[kind] = file
        self.secret_values.update(raw.interpolation.secret_values)
        self.secret_values.update(collect_named_secrets(raw.data))  # e.g. data's api_key
        self.secret_keys[kind] = frozenset(raw.interpolation.secret_keys)
        return raw


def _data_of(raw_data: RawDocument | None) -> dict[str, Any]:
    """The run's data: a mapping of keys, empty without a data file."""
    if raw_data is None:
        return {}
    if not isinstance(raw_data.data, Mapping):
        raise ConfigError(f"expected a mapping of keys, got {type(raw_data.data).__name__}",
                          source=raw_data.path)
    return dict(raw_data.data)


def _script_of(raw_script: RawDocument | None, secret_values: set[str]) -> ScriptConfig | None:
    """The script validated, each turn's audio resolved against the script file."""
    if raw_script is None:
        return None
    script = validate_model(ScriptConfig, raw_script.data, source=raw_script.path,
                            overrides=raw_script.overrides, secret_values=secret_values)
    turns = [turn.model_copy(update={"audio_path": resolve_relative(raw_script.path,
                                                                    turn.audio_path)})
             for turn in script.turns]
    return script.model_copy(update={"turns": turns})


def _environment_of(raw_environment: RawDocument | None,
                    secret_values: set[str]) -> EnvironmentConfig:
    """The environment validated, its sounds resolved against its file; quiet without one."""
    if raw_environment is None:
        return QUIET_ENVIRONMENT
    environment = validate_model(EnvironmentConfig, raw_environment.data,
                                 source=raw_environment.path,
                                 overrides=raw_environment.overrides,
                                 secret_values=secret_values)
    return _resolve_environment_paths(environment, raw_environment.path)
