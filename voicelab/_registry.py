"""Name registries: a config names a built-in (``adapter: websocket``) or a dotted path
(``adapter: my_pkg.adapters.Thing``) the same way, and both resolve lazily."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import ConfigError


def import_dotted(path: str, *, search_dirs: Iterable[Path] = (), source: str | Path | None = None,
                  key: str | None = None) -> Any:
    """Import ``pkg.module.Name`` (or ``pkg.module:Name``).

    ``search_dirs`` (typically the run file's folder) are appended to ``sys.path`` so a module
    beside the configuration imports without packaging it.
    """
    module_name, _, attribute = path.replace(":", ".").rpartition(".")
    if not module_name or not attribute:
        raise ConfigError(f"{path!r} is not a dotted path like 'package.module.Name'",
                          source=source, key=key)
    for directory in search_dirs:
        text = str(directory)
        if text not in sys.path:
            sys.path.append(text)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"cannot import {path!r}: {error}", source=source, key=key) from None
    except Exception as error:  # noqa: BLE001 - user code failing at import is a config error
        raise ConfigError(f"importing {path!r} failed: {type(error).__name__}: {error}",
                          source=source, key=key) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigError(f"cannot import {path!r}: module {module_name!r} has no "
                          f"attribute {attribute!r}", source=source, key=key) from None


class Registry:
    """Built-in names mapped to ``module:attribute`` targets, imported on first use."""

    def __init__(self, kind: str, builtins: dict[str, str] | None = None):
        self.kind = kind
        self._targets: dict[str, str | Any] = dict(builtins or {})

    def register(self, name: str, target: str | Any) -> None:
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def is_builtin(self, name: str) -> bool:
        return name in self._targets

    def resolve(self, name: str, *, search_dirs: Iterable[Path] = (),
                source: str | Path | None = None, key: str | None = None) -> Any:
        target = self._targets.get(name)
        if target is None:
            if "." not in name and ":" not in name:
                raise ConfigError(f"unknown {self.kind} {name!r}; built-in: "
                                  f"{', '.join(self.names())} (or a dotted path)",
                                  source=source, key=key)
            return import_dotted(name, search_dirs=search_dirs, source=source, key=key)
        if isinstance(target, str):
            return import_dotted(target, source=source, key=key)
        return target
