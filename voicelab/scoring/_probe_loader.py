"""Loading an outcome probe class by built-in name or dotted path."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._registry import Registry
from ..errors import ConfigError
from ._probe import OutcomeProbe

PROBES = Registry("outcome probe", group="voicelab.probes", builtins={
    "fake": "voicelab.doubles.product:FakeProductProbe",
})


def load_probe_class(name: str, *, search_dirs: Iterable[Path] = (),
                     source: str | Path | None = None, key: str = "outcome_probe.probe") -> Any:
    probe = PROBES.resolve(name, search_dirs=search_dirs, source=source, key=key)
    if not inspect.isclass(probe) and not callable(probe):
        raise ConfigError(f"{name!r} is not a class or factory", source=source, key=key)
    if inspect.isclass(probe) and not issubclass(probe, OutcomeProbe):
        raise ConfigError(f"{name!r} is not an OutcomeProbe: missing probe()", source=source,
                          key=key)
    return probe
