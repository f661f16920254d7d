"""One name for who ends the user's turn: ``turn_taking`` (``client`` or ``server_vad``).

Endpoint settings once spelled it ``turn_detection``; that spelling is still read, as a
deprecated alias (``validate`` warns, naming the file and key), and a run config is kept under
the one name from the moment it is loaded, so the bundle's recorded config says
``turn_taking``. The OpenAI Realtime session's own ``turn_detection`` (inside ``session:``) is
OpenAI's field and is not this setting.

An adapter whose settings model still declares the old field gets the value under that name
(:func:`spelled_for`), and a ``turn_taking(settings)`` classmethod that still reads it finds it
(:func:`with_old_spelling`), so a rename inside an adapter is one field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

#: voicelab's name of the setting, and the older spelling still accepted
TURN_TAKING = "turn_taking"
OLD_TURN_TAKING = "turn_detection"

Value = TypeVar("Value")


def canonical_turn_taking(settings: Mapping[str, Value]) -> dict[str, Value]:
    """``settings`` with the turn-taking setting under its one name, where it was written.
    Both spellings with different values are refused (``ValueError``): nothing could tell
    which one was meant."""
    if OLD_TURN_TAKING not in settings:
        return dict(settings)
    if TURN_TAKING in settings and settings[TURN_TAKING] != settings[OLD_TURN_TAKING]:
        raise ValueError(f"{TURN_TAKING} and {OLD_TURN_TAKING} (its older spelling) are both "
                         f"given and differ: keep {TURN_TAKING} alone")
    return _renamed(settings, OLD_TURN_TAKING, TURN_TAKING)


def _renamed(settings: Mapping[str, Value], old: str, new: str) -> dict[str, Value]:
    """``settings`` with the key ``old`` named ``new``, in its place (a ``new`` beside it,
    of the same value, is dropped)."""
    if old not in settings:
        return dict(settings)
    return {(new if key == old else key): value for key, value in settings.items()
            if key != new}


def spelled_for(fields: Iterable[str], settings: Mapping[str, Value]) -> dict[str, Value]:
    """``settings`` as a settings model declaring ``fields`` reads them: the turn-taking setting
    under the model's own spelling (a model declaring neither gets them as given, and refuses
    them as unknown)."""
    declared = set(fields)
    if TURN_TAKING in declared:
        return canonical_turn_taking(settings)
    if OLD_TURN_TAKING in declared:
        return under_old_name(canonical_turn_taking(settings))
    return dict(settings)


def with_old_spelling(settings: Mapping[str, Value]) -> dict[str, Value]:
    """``settings`` with the turn-taking setting under both names, for an adapter's
    ``turn_taking(settings)`` that still reads the old one."""
    spelled = dict(settings)
    if TURN_TAKING in spelled:
        spelled.setdefault(OLD_TURN_TAKING, spelled[TURN_TAKING])
    return spelled


def under_old_name(settings: Mapping[str, Value]) -> dict[str, Value]:
    """``settings`` with the turn-taking setting under its older name: what an adapter model
    that still declares it reads, and what the suite hash reads, so a configuration keeps the
    hash it had before the rename (a bundle made then still resumes)."""
    return _renamed(settings, TURN_TAKING, OLD_TURN_TAKING)
