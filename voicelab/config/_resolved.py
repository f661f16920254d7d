"""Sanitized resolved configuration documents and the suite hash."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._secrets import MASK, mask_transport

if TYPE_CHECKING:
    from ._loader import LoadedRun

#: Run settings that change how a run executes or is judged, not what each trial tests (a
#: resumed run may change its gates or its confidence level).
_EXECUTION_ONLY: tuple[str, ...] = ("artifacts_dir", "trials", "concurrency", "scenario_path", "persona_path",
                   "data_path", "script_path", "environment_path", "statistics", "gates")
#: ... and how its measurements are judged (loop-lag tolerances, lag budget)
_EXECUTION_ONLY += ("measurement",)
#: ... and what it costs (a price table changes what a trial is said to cost, not the trial)
_EXECUTION_ONLY += ("pricing", "pricing_path")


def _mask_key_paths(document: Any, key_paths: frozenset[str]) -> Any:
    """Mask values whose key path was interpolated from a secret environment variable."""
    if not key_paths:
        return document

    def walk(node: Any, prefix: str) -> Any:
        if prefix in key_paths:
            return MASK
        if isinstance(node, dict):
            return {k: walk(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{prefix}[{i}]") for i, v in enumerate(node)]
        return node

    return walk(document, "")


def _json_keys(node: Any) -> Any:
    """Mapping keys ``json.dumps`` cannot write (YAML allows dates as keys) as their text."""
    if isinstance(node, dict):
        return {k if k is None or isinstance(k, str | int | float) else str(k): _json_keys(v)
                for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_json_keys(v) for v in node]
    return node


def resolved_documents(loaded: LoadedRun) -> dict[str, Any]:
    """``settings`` (the run file) and each referenced document, JSON-ready and sanitized."""
    documents: dict[str, Any] = {
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


def _replace_paths_by_hashes(node: Any) -> Any:
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
    settings = {k: v for k, v in documents["settings"].items() if k not in _EXECUTION_ONLY}
    payload = {**documents, "settings": settings}
    payload = _replace_paths_by_hashes(payload)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
