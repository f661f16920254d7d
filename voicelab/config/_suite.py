"""Loading a suite file: lists of scenarios, personas (with scripts and data) and environments."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ._loader import (
    load_pricing,
    read_document,
    require_file,
    resolve_location,
    resolve_relative,
)
from ._overrides import validate_model
from ._suite_models import SuiteConfig, SuitePersona


@dataclass(frozen=True)
class LoadedSuite:
    path: Path
    suite: SuiteConfig
    scenarios: list[Path | None]          # None: the base run's own scenario
    personas: list[SuitePersona | None]   # None: the base run's own persona/script/data
    environments: list[Path | None | str]  # None: quiet; BASE: the base run's own environment

    @property
    def base(self) -> Path:
        return self.suite.base


def load_suite(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LoadedSuite:
    """Validate a suite file and resolve its paths (relative to the suite file)."""
    path = Path(path).expanduser().resolve()
    raw = read_document(path, environ=os.environ if environ is None else environ)
    suite = validate_model(SuiteConfig, raw.data, source=path)
    base = resolve_relative(path, suite.base)
    assert base is not None
    require_file(base, source=path, key="base")
    scenarios: list[Path | None] = []
    for index, scenario in enumerate(suite.scenarios):
        resolved = resolve_relative(path, scenario)
        assert resolved is not None
        require_file(resolved, source=path, key=f"scenarios[{index}]")
        scenarios.append(resolved)
    personas: list[SuitePersona | None] = []
    for index, persona in enumerate(suite.personas):
        fields = {}
        named = {"persona": persona.persona, "script": persona.script, "data": persona.data}
        for name, given in named.items():
            value = resolve_relative(path, given)
            if value is not None:
                require_file(value, source=path, key=f"personas[{index}].{name}")
            fields[name] = value
        personas.append(persona.model_copy(update=fields))
    environments: list[Path | None | str] = []
    for index, environment in enumerate(suite.environments):
        if environment == "quiet":
            environments.append(None)
            continue
        resolved = resolve_relative(path, Path(environment))
        assert resolved is not None
        require_file(resolved, source=path, key=f"environments[{index}]")
        environments.append(resolved)
    artifacts = None if suite.artifacts_dir is None else \
        resolve_location(path, suite.artifacts_dir)
    pricing = suite.pricing
    if suite.pricing_path is not None:
        pricing_path = resolve_relative(path, suite.pricing_path)
        assert pricing_path is not None
        pricing = load_pricing(pricing_path, referrer=path, key="pricing_path")
    suite = suite.model_copy(update={"base": base, "artifacts_dir": artifacts,
                                     "pricing": pricing, "pricing_path": None})
    return LoadedSuite(path, suite, scenarios or [None], personas or [None],
                       environments or [BASE])


BASE = "base"


def pricing_overrides(suite: SuiteConfig) -> list[str]:
    """``--set`` overrides that price every cell with the suite's table (none: each cell keeps
    its base run's)."""
    if suite.pricing is None:
        return []
    table = json.dumps(suite.pricing.model_dump(mode="json", exclude_none=True))
    return [f"pricing={table}", "pricing_path=null"]


def cell_overrides(scenario: Path | None, persona: SuitePersona | None,
                   environment: Path | None | str) -> list[str]:
    """``--set`` overrides that turn the base run into one cell of the matrix."""
    overrides: list[str] = []
    if scenario is not None:
        overrides.append(f"scenario_path={scenario}")
    if persona is not None:
        overrides.append(f"persona_path={persona.persona}")
        if persona.script is not None:
            overrides.append(f"script_path={persona.script}")
        if persona.data is not None:
            overrides.append(f"data_path={persona.data}")
        if persona.persona_mode is not None:
            overrides.append(f"persona_mode={persona.persona_mode}")
    if environment is None:
        overrides.append("environment_path=null")
    elif environment != BASE:
        overrides.append(f"environment_path={environment}")
    return overrides


def check_names_unique(names: Sequence[str], *, source: Path, key: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"two entries are both named {name!r}; matrix cells need "
                              f"distinct names", source=source, key=key)
        seen.add(name)
