"""Name registries: a config names a built-in (``adapter: websocket``), a plug-in an installed
distribution registers under an entry-point group (``adapter: acme_phone``), or a dotted path
(``adapter: my_pkg.adapters.Thing``) the same way, and all three resolve lazily.

A built-in name always wins over a plug-in registering the same name: the plug-in is never
loaded (an unknown name's error lists it as hidden), so installing a package cannot change what
a run file naming a built-in means. Entry points are read only when a plain name is not
built-in, once per registry (so once per process for the module-level registries).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
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


@dataclass(frozen=True)
class Plugin:
    """One name an installed distribution registers in an entry-point group."""

    name: str
    distribution: str
    entry_point: EntryPoint


def installed_plugins(group: str) -> dict[str, list[Plugin]]:
    """Every name registered under ``group``, with each distribution that registers it (one
    entry per distribution: the same distribution found twice on the path counts once)."""
    found: dict[str, list[Plugin]] = {}
    for entry_point in entry_points(group=group):
        # a METADATA without a Name field gives None where the stubs promise a str
        named = entry_point.dist.name if entry_point.dist is not None else None
        distribution = named or "(unnamed)"
        plugins = found.setdefault(entry_point.name, [])
        if all(plugin.distribution != distribution for plugin in plugins):
            plugins.append(Plugin(entry_point.name, distribution, entry_point))
    return found


def is_plain_name(name: str) -> bool:
    """A built-in's or a plug-in's name; anything with a dot or colon is a dotted path."""
    return "." not in name and ":" not in name


class Registry:
    """Built-in names mapped to ``module:attribute`` targets, imported on first use, and the
    names installed distributions register under the entry-point ``group``."""

    def __init__(self, kind: str, builtins: dict[str, str] | None = None, *,
                 group: str | None = None):
        self.kind = kind
        self.group = group
        self._targets: dict[str, str | Any] = dict(builtins or {})
        self._plugins: dict[str, list[Plugin]] | None = None

    def register(self, name: str, target: str | object) -> None:
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def is_builtin(self, name: str) -> bool:
        return name in self._targets

    def plugins(self) -> dict[str, list[Plugin]]:
        """The group's entry points, read the first time they are needed and kept."""
        if self._plugins is None:
            self._plugins = installed_plugins(self.group) if self.group is not None else {}
        return self._plugins

    def resolve(self, name: str, *, search_dirs: Iterable[Path] = (),
                source: str | Path | None = None, key: str | None = None) -> Any:
        target = self._targets.get(name)
        if target is None:
            if is_plain_name(name):
                return self._load_plugin(name, source=source, key=key)
            return import_dotted(name, search_dirs=search_dirs, source=source, key=key)
        if isinstance(target, str):
            return import_dotted(target, source=source, key=key)
        return target

    def _load_plugin(self, name: str, *, source: str | Path | None, key: str | None) -> object:
        """The object the one distribution registering ``name`` points to; an import failure in
        the plug-in is the configuration's problem to report, never a traceback."""
        registered = self.plugins().get(name, [])
        if not registered:
            raise ConfigError(self._unknown(name), source=source, key=key)
        if len(registered) > 1:
            owners = ", ".join(sorted(plugin.distribution for plugin in registered))
            raise ConfigError(f"the {self.kind} {name!r} is registered by more than one "
                              f"distribution ({owners}) in the entry-point group "
                              f"{self.group!r}: uninstall one, or name its class by dotted path",
                              source=source, key=key)
        plugin = registered[0]
        try:
            return plugin.entry_point.load()
        except Exception as error:  # noqa: BLE001 - a plug-in failing at import is a config error
            raise ConfigError(f"the {self.kind} {name!r} of the distribution "
                              f"{plugin.distribution!r} ({plugin.entry_point.value}) failed to "
                              f"load: {type(error).__name__}: {error}",
                              source=source, key=key) from None

    def _unknown(self, name: str) -> str:
        """The error for a name nothing provides: what is built in and what is installed."""
        text = f"unknown {self.kind} {name!r}; built-in: {', '.join(self.names())}"
        installed = [f"{plugin_name} ({', '.join(p.distribution for p in plugins)}"
                     f"{'; hidden by the built-in' if self.is_builtin(plugin_name) else ''})"
                     for plugin_name, plugins in sorted(self.plugins().items())]
        if self.group is not None:
            text += f"; plug-ins installed under {self.group!r}: {', '.join(installed) or 'none'}"
        return text + " (or a dotted path)"
