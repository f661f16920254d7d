"""A loaded run, and what is derived from it: sanitized resolved documents and the suite hash."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ._environment import EnvironmentConfig
from ._persona import PersonaConfig, ScriptConfig
from ._run import RunConfig
from ._scenario import ScenarioConfig
from ._secrets import MASK, SecretScrubber, is_secret_name, mask_transport
from ._turn_taking import under_old_name

#: Run settings that change how a run executes or is judged, not what each trial tests (a
#: resumed run may change its gates or its confidence level).
_EXECUTION_ONLY: tuple[str, ...] = ("artifacts_dir", "trials", "concurrency", "scenario_path", "persona_path",
                   "data_path", "script_path", "environment_path", "statistics", "gates")
#: ... and how its measurements are judged (loop-lag tolerances, lag budget)
_EXECUTION_ONLY += ("measurement",)
#: ... and what it costs (a price table changes what a trial is said to cost, not the trial)
_EXECUTION_ONLY += ("pricing", "pricing_path")


@dataclass(frozen=True)
class LoadedRun:
    """A validated run with every path resolved, plus what is needed to sanitize and hash it."""

    run_path: Path
    run: RunConfig
    scenario: ScenarioConfig
    persona: PersonaConfig
    data: dict[str, Any]
    script: ScriptConfig | None
    environment: EnvironmentConfig
    sources: dict[str, Path]
    scrubber: SecretScrubber
    secret_keys: dict[str, frozenset[str]]
    #: the ``--set`` overrides as given (``key=value`` texts), in order
    overrides: tuple[str, ...] = ()

    @property
    def base_dir(self) -> Path:
        return self.run_path.parent

    def recorded_overrides(self) -> list[str]:
        """The ``--set`` overrides as a bundle keeps them (:func:`recorded_overrides`)."""
        return recorded_overrides(self.overrides, self.scrubber)

    def resolved_documents(self) -> dict[str, JsonValue]:
        """Every resolved config as JSON-ready data, sanitized (for resolved-*.json and hashing).

        Computed once: a loaded run is immutable (callers must not mutate the result)."""
        cached = self.__dict__.get("_resolved_documents")
        if cached is None:
            cached = resolved_documents(self)
            object.__setattr__(self, "_resolved_documents", cached)
        return cached

    def suite_hash(self) -> str:
        cached = self.__dict__.get("_suite_hash")
        if cached is None:
            cached = suite_hash(self)
            object.__setattr__(self, "_suite_hash", cached)
        return cached

    def asset_paths(self) -> list[tuple[str, str, Path]]:
        """(document file, key path, file) for every audio asset the run references."""
        assets: list[tuple[str, str, Path]] = []
        if self.run.environment_path is not None:
            for key, path in self.environment.asset_paths():
                assets.append((str(self.sources["environment"]), key, path))
        if self.script is not None:
            for index, turn in enumerate(self.script.turns):
                if turn.audio_path is not None:
                    assets.append((str(self.sources["script"]), f"turns[{index}].audio_path",
                                   turn.audio_path))
        return assets


def recorded_overrides(overrides: Sequence[str], scrubber: SecretScrubber) -> list[str]:
    """``--set`` texts as a bundle keeps them (a resumed run applies them again): a value under
    a secret-named key, or holding one of ``scrubber``'s secrets, is masked."""
    recorded = []
    for text in overrides:
        key = text.partition("=")[0]
        if any(is_secret_name(part) for part in re.split(r"[.\[\]]", key) if part):
            recorded.append(f"{key}={MASK}")
        else:
            recorded.append(scrubber.scrub_text(text))
    return recorded


def _mask_key_paths(document: object, key_paths: frozenset[str]) -> object:
    """Mask values whose key path was interpolated from a secret environment variable."""
    if not key_paths:
        return document

    def walk(node: object, prefix: str) -> object:
        if prefix in key_paths:
            return MASK
        if isinstance(node, dict):
            return {k: walk(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{prefix}[{i}]") for i, v in enumerate(node)]
        return node

    return walk(document, "")


def _json_keys(node: object) -> object:
    """Mapping keys ``json.dumps`` cannot write (YAML allows dates as keys) as their text."""
    if isinstance(node, dict):
        return {k if k is None or isinstance(k, str | int | float) else str(k): _json_keys(v)
                for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_json_keys(v) for v in node]
    return node


def resolved_documents(loaded: LoadedRun) -> dict[str, JsonValue]:
    """``settings`` (the run file) and each referenced document, JSON-ready and sanitized."""
    documents: dict[str, object] = {
        "settings": loaded.run.model_dump(mode="json"),
        "scenario": loaded.scenario.model_dump(mode="json"),
        "persona": loaded.persona.model_dump(mode="json"),
        "data": json.loads(json.dumps(_json_keys(loaded.data), default=str)),
        "script": loaded.script.model_dump(mode="json") if loaded.script else None,
        "environment": loaded.environment.model_dump(mode="json"),
    }
    keys = {"settings": loaded.secret_keys.get("run", frozenset())}
    for kind in ("scenario", "persona", "data", "script", "environment"):
        keys[kind] = loaded.secret_keys.get(kind, frozenset())
    # handshake headers and URL credentials of the run file are secrets whatever their names
    documents["settings"] = mask_transport(documents["settings"])
    return {kind: loaded.scrubber.scrub(_mask_key_paths(doc, keys[kind]))
            for kind, doc in documents.items()}


@lru_cache(maxsize=256)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    stat = path.stat()
    return _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def _replace_paths_by_hashes(node: object) -> object:
    if isinstance(node, dict):
        return {k: _replace_paths_by_hashes(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace_paths_by_hashes(v) for v in node]
    if isinstance(node, str) and node.startswith("/"):
        path = Path(node)
        if path.is_file():
            return f"sha256:{file_sha256(path)}"
    return node


def suite_hash(loaded: LoadedRun) -> str:
    """sha256 over the sanitized resolved configs, with asset paths replaced by content hashes.

    Moving a checkout or changing the artifacts directory or trial count keeps the hash; changing
    a scenario, a persona, the data, a script line or one byte of an audio asset changes it.
    """
    documents = loaded.resolved_documents()
    run = documents["settings"]
    settings: dict[str, JsonValue] = {k: v for k, v in run.items() if k not in _EXECUTION_ONLY} \
        if isinstance(run, dict) else {}
    endpoint = settings.get("endpoint")
    if isinstance(endpoint, dict) and isinstance(adapter := endpoint.get("settings"), dict):
        # hashed under the name it had before the rename: the hash of a configuration stays
        settings["endpoint"] = {**endpoint, "settings": under_old_name(adapter)}
    payload = _replace_paths_by_hashes({**documents, "settings": settings})
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
