"""The ``--set`` overrides of a resumed run: the ones the run started with, kept in its report.

A resumed run must test what the run tested (its suite hash is checked), so it applies the
overrides the bundle recorded (``RunReport.overrides``) without their being typed again. A
``--set`` given with ``--resume`` may repeat one of them; one that sets the same key to another
value is refused (a resumed run keeps its configuration).

A bundle is input from outside: what it records must not choose code or where voicelab connects
or what it launches. A recorded override of an adapter, a launch command, an outcome probe, a
persona mode, a speech provider, LLM providers or a whole ``endpoint`` / ``endpoint.settings``
block, one whose value holds a URL, and one whose value was masked as a secret, is not taken
from the bundle: it must be given again with ``--set`` (the error says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import MASK, Override
from ..errors import ConfigError

#: Run-file keys whose value picks code, a process or a destination (key paths; a path under
#: one of the ``*_BELOW`` ones counts too).
_CHOOSES_EXACT = frozenset({("endpoint",), ("endpoint", "settings")})
_CHOOSES_BELOW = (("endpoint", "adapter"), ("endpoint", "launch"), ("outcome_probe",),
                  ("persona_mode",), ("speech_provider",), ("providers",))


def _holds_url(value: Any) -> bool:
    if isinstance(value, str):
        return "://" in value
    if isinstance(value, dict):
        return any(_holds_url(k) or _holds_url(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_url(v) for v in value)
    return False


def _why_not_from_a_bundle(override: Override) -> str | None:
    path = override.path
    if override.document == "run" and (
            path in _CHOOSES_EXACT
            or any(path[:len(prefix)] == prefix for prefix in _CHOOSES_BELOW)):
        return "code, a process or a destination is never taken from a bundle"
    if _holds_url(override.value):
        return "a URL is never taken from a bundle"
    return None


def _recorded(text: str, *, bundle: str) -> tuple[Override, str | None]:
    """A recorded override and why it must be given again (None: it may be reused)."""
    key, _, value = text.partition("=")
    try:
        if MASK in value:  # "***" is no YAML value: the key alone identifies it
            return Override.parse(f"{key}=null"), "its value is a secret the bundle does not keep"
        override = Override.parse(text)
    except ConfigError as error:
        raise ConfigError(f"a recorded --set override is not valid ({error.message})",
                          source=bundle, key="overrides") from None
    return override, _why_not_from_a_bundle(override)


def resumed_overrides(recorded: Sequence[str], given: Sequence[str], *,
                      bundle: str) -> list[str]:
    """The overrides to load a resumed run with: ``recorded`` (the bundle's), each replaced by
    a ``given`` one of the same key (the same value, or one the bundle could not keep), then
    the other given ones (a change the suite hash check refuses). Raises
    :class:`ConfigError` for a given value that contradicts a recorded one and for a recorded
    override that must be given again."""
    by_key = {}
    for text in given:
        parsed = Override.parse(text)
        by_key[parsed.key] = (parsed, text)
    merged: list[str] = []
    for text in recorded:
        stored, why = _recorded(text, bundle=bundle)
        if stored.key not in by_key:
            if why is not None:
                raise ConfigError(f"the run was started with --set {text}; {why}: give it again "
                                  f"with --set", source=bundle, key="overrides")
            merged.append(text)
            continue
        repeated, repeated_text = by_key.pop(stored.key)
        if why is None and repeated.value != stored.value:
            raise ConfigError(f"conflicts with the run's --set {text} (kept in the bundle): a "
                              "resumed run keeps its configuration", source=f"--set {repeated_text}")
        merged.append(repeated_text)
    return [*merged, *(text for _, text in by_key.values())]


__all__ = ["resumed_overrides"]
