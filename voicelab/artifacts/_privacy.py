"""A bundle's privacy: one rule for every text it writes, and who may read it.

**Words.** Every text member of a bundle passes one filter when it is written (:func:`filter_member`):
a run's secrets always (the run's configured and interpolated secrets, store credentials), and,
when the run says ``retention: {transcripts: redacted}``, its redaction rules too (personal data:
e-mail addresses, long digit runs, the values of sensitive fields, configured patterns). The rule
is by the member's kind, not by its name, so a file added later is covered without anyone
listing it: a JSON document is filtered string by string (keys included; numbers, booleans and
the layout are kept, so it stays a valid document of its schema), a JSON-lines file line by line,
any other text as a whole; audio is never touched. Identifiers the evaluator makes itself
(:data:`IDENTIFIER_KEYS`: W3C trace and span ids, event ids, hashes) are kept, because a random
hexadecimal id can look like a number. Under a field the redaction names sensitive, every string
and every whole number of :data:`MIN_SENSITIVE_DIGITS` digits or more is replaced.

**Access.** A bundle is its owner's alone unless the run config says otherwise
(``retention.access``): folders are created ``0700`` and files ``0600`` (``group``: ``0750`` /
``0640``; ``umask``: what the process's umask leaves). A member's mode follows the folder it is
written in (:func:`member_mode`), so a run folder created private keeps every file private.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from .._atomic import current_umask, file_mode_in
from ..config import BundleAccess, distinct_key

DEFAULT_ACCESS: BundleAccess = "owner"
_FOLDER_MODES: dict[str, int] = {"owner": 0o700, "group": 0o750}

#: Keys whose values are identifiers the evaluator makes (random hexadecimal, UUIDs, hashes):
#: never words, and a redaction pattern for long numbers could match one that happens to hold
#: only decimal digits.
IDENTIFIER_KEYS = frozenset({"trace_id", "span_id", "parent_span_id", "root_span_id",
                             "event_id", "suite_hash", "schema_version", "contract_version"})
#: A whole number under a sensitive field is replaced from this many digits (an account or
#: phone number kept as a number); shorter ones are counts and indices.
MIN_SENSITIVE_DIGITS = 7
#: Members never filtered: audio.
_AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".opus", ".mp3")

_Model = TypeVar("_Model", bound=BaseModel)


class Redacts(Protocol):
    """What filters a bundle's words (``voicelab.scoring.Redactor`` is one)."""

    @property
    def replacement(self) -> str:
        """What a sensitive field's value becomes."""

    @property
    def sensitive_fields(self) -> frozenset[str]:
        """The casefolded names of the fields whose values are replaced whole."""

    @property
    def changes_nothing(self) -> bool:
        """True when the filter has nothing to replace (no secrets, no rules): a fast path."""

    @property
    def replaces_literals_only(self) -> bool:
        """True when the filter replaces known values only (secrets, sensitive values), no
        patterns: a text it leaves unchanged as a whole holds none of them (a fast path)."""

    def text(self, text: str) -> str:
        """``text`` with every secret and every match of the rules replaced."""


# --- words ---------------------------------------------------------------------------------------

def is_audio_member(name: str) -> bool:
    return name.lower().endswith(_AUDIO_SUFFIXES)


def filter_value(value: object, words: Redacts) -> Any:
    """A copy of a JSON-like value with its strings (and mapping keys) filtered; see the module
    docstring."""
    return _filtered(value, words, sensitive=False)


def _filtered(value: object, words: Redacts, *, sensitive: bool) -> Any:
    if isinstance(value, str):
        if sensitive:
            return words.replacement if value else value
        return _filtered_string(value, words)
    if isinstance(value, Mapping):
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if name in IDENTIFIER_KEYS and (item is None or isinstance(item, str)):
                filtered = item
            else:
                filtered = _filtered(item, words, sensitive=sensitive or (
                    item is not None and name.casefold() in words.sensitive_fields))
            cleaned[distinct_key(words.text(name), cleaned)] = filtered
        return cleaned
    if isinstance(value, list | tuple):
        return [_filtered(item, words, sensitive=sensitive) for item in value]
    if sensitive and isinstance(value, int) and not isinstance(value, bool) \
            and len(str(abs(value))) >= MIN_SENSITIVE_DIGITS:
        return words.replacement
    return value


def _filtered_string(text: str, words: Redacts) -> str:
    """A string's words; a string holding a JSON object or array (tool arguments, a raw
    message's payload) is filtered as JSON, so its numbers and layout stay valid JSON."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) > 1:
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            cleaned = filter_value(parsed, words)
            return text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
    return words.text(text)


def filter_member(name: str, data: bytes, words: Redacts, *, compact: bool = False) -> bytes:
    """The bytes of a member as written with ``words`` applied (see the module docstring):
    ``data`` itself when nothing changes. ``compact``: a JSON document written without
    indentation."""
    if is_audio_member(name) or words.changes_nothing or not data:
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    if words.replaces_literals_only and not words.sensitive_fields \
            and words.text(text) == text:
        return data  # no secret and no known value anywhere, not even inside a string
    lower = name.lower()
    if lower.endswith(".jsonl"):
        lines = text.split("\n")
        changed = _lines_with_words(lines, words)
        if not changed:
            return data
        out = [_filtered_line(line, words) if index in changed else line
               for index, line in enumerate(lines)]
        return "\n".join(out).encode("utf-8", errors="surrogateescape")
    if lower.endswith(".json"):
        if not _lines_with_words([text], words):
            return data  # no string of the document would change
        try:
            document = json.loads(text)
        except ValueError:
            return words.text(text).encode("utf-8", errors="surrogateescape")
        cleaned = filter_value(document, words)
        if cleaned == document:
            return data
        if compact:
            out_text = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))
        else:
            out_text = json.dumps(cleaned, indent=2, ensure_ascii=False)
        return (out_text + ("\n" if text.endswith("\n") else "")).encode(
            "utf-8", errors="surrogateescape")
    filtered = words.text(text)
    return data if filtered == text else filtered.encode("utf-8", errors="surrogateescape")


#: A JSON string literal (its escapes kept): where a JSON text's words can be.
_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: Between the strings of two lines when a file's strings are filtered in one pass: no rule's
#: match crosses it (a line break and a NUL: no text, number or address holds them).
_LINE_BREAK = "\n\x00\n"


def _lines_with_words(lines: list[str], words: Redacts) -> set[int]:
    """The indices of the JSON texts whose strings the filter would change (or that may hold a
    sensitive field), found in one pass of the filter over every string literal: numbers
    outside strings are never words, and most lines of a recording (audio chunks) hold only ids
    and names."""
    strings = ["\n".join(_STRING_LITERAL.findall(line)) for line in lines]
    joined = _LINE_BREAK.join(strings)
    filtered = words.text(joined)
    changed: set[int] = set()
    if filtered != joined:
        pieces = filtered.split(_LINE_BREAK)
        if len(pieces) != len(strings):  # a rule matched across lines: look at each
            changed = {i for i, piece in enumerate(strings) if words.text(piece) != piece}
        else:
            changed = {i for i, (before, after) in enumerate(zip(strings, pieces, strict=True))
                       if before != after}
    if words.sensitive_fields:
        changed |= {i for i, line in enumerate(lines) if _may_hold_sensitive_fields(line, words)}
    return changed


def _may_hold_sensitive_fields(text: str, words: Redacts) -> bool:
    """Whether a JSON text may hold a field the rules name sensitive (its values are replaced
    whole, whatever they are): the redaction says which fields; the text is only searched."""
    if not words.sensitive_fields:
        return False
    folded = text.casefold()
    return any(name in folded for name in words.sensitive_fields)


def _filtered_line(line: str, words: Redacts) -> str:
    if not line.strip():
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return words.text(line)
    cleaned = filter_value(record, words)
    if cleaned == record:
        return line
    return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))


def filter_model(model: _Model, words: Redacts) -> _Model:
    """A report (any artifact model) with ``words`` applied to every string it holds: the same
    object when nothing changes."""
    if words.changes_nothing:
        return model
    document = model.model_dump(mode="json")
    cleaned = filter_value(document, words)
    if cleaned == document:
        return model
    return type(model).model_validate(cleaned)


# --- access --------------------------------------------------------------------------------------

def folder_mode(access: BundleAccess) -> int:
    """The mode a bundle's folders are created with (the umask may take more away)."""
    return _FOLDER_MODES.get(access, 0o777 & ~current_umask())


def member_mode(folder: str | os.PathLike[str]) -> int:
    """The mode of a file written in ``folder``: the folder's read and write bits (a private
    folder's files are private; a folder made by the umask gives the umask's files)."""
    return file_mode_in(folder)


def make_private_folder(path: Path, *, access: BundleAccess = DEFAULT_ACCESS) -> Path:
    """Create ``path`` (and missing parents, as the umask makes them) with the bundle's mode;
    an existing folder keeps its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=folder_mode(access))
    except FileExistsError:
        pass
    return path
