"""voice-events.jsonl -> the columns of the events frame, at the cost of parsing the JSON.

Each file is decoded in one ``json.loads`` call (its lines joined into an array) and every
record checked by the bundle reader (a record missing a key or holding a value of another type
is refused naming its line); its columns are taken while the records are fresh. Categoricals
become codes at once, so the decoded strings and dicts are freed file by file instead of piling
up (keeping 300,000 event dicts alive to read them later costs more than decoding them). Derived columns follow the contract in
docs/artifacts.md: ``offset_ms`` is ``monotonic_offset_ns / 1e6``; ``timestamp_utc`` is the
trial's wall start plus the monotonic offset (the writer derives it so; equal to the recorded
string within its 1 us rounding); ``listener_ms`` is ``listener_offset_ns / 1e6`` (schema 2.0;
for 1.0 bundles, which lack it, the offset plus every ``timeline.virtual_advance`` recorded
before the event).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import JsonValue

from ..artifacts import check_version, read_voice_events
from ._json import JsonObject

VIRTUAL_ADVANCE = "timeline.virtual_advance"


def read_events(path: Path) -> list[JsonObject]:
    """The checked records of a voice-events.jsonl (:func:`voicelab.artifacts.read_voice_events`:
    one decode of the whole file, every record checked); none when the trial kept no file."""
    if not os.path.lexists(path):  # a link is refused by the reader, never followed
        return []
    return read_voice_events(path)


class _Codes(dict):
    """value -> categorical code, assigned in first-seen order; None is -1 (missing)."""

    def __init__(self) -> None:
        super().__init__({None: -1})

    def __missing__(self, value: JsonValue) -> int:
        code = self[value] = len(self) - 1
        return code

    def categorical(self, codes: list[int]) -> pd.Categorical:
        categories = pd.Index(list(self)[1:], dtype=object)
        return pd.Categorical.from_codes(np.asarray(codes, dtype=np.int32), categories=categories)


_EVENT_CATEGORIES = ("event_type", "turn_id", "source", "direction", "speaker_role")
_EVENT_DEFAULTS: JsonObject = {"turn_id": None, "speaker_role": None, "pcm": None, "attributes": {}}
_get_pcm, _get_attributes = itemgetter("pcm"), itemgetter("attributes")
_get_sequence, _get_monotonic = itemgetter("sequence"), itemgetter("monotonic_offset_ns")
_get_listener = itemgetter("listener_offset_ns")
_get_bytes, _get_duration = itemgetter("byte_count"), itemgetter("duration_ms")


class EventColumns:
    """Columns of every trial's voice events, taken from each file's records while they are
    fresh (and then freed): far cheaper than keeping 300,000 dicts alive to read them later.
    Categoricals become codes at once, so their strings are freed with the records."""

    def __init__(self) -> None:
        self.tables = {key: _Codes() for key in _EVENT_CATEGORIES}
        self.codes: dict[str, list[int]] = {key: [] for key in _EVENT_CATEGORIES}
        self.getters = {key: itemgetter(key) for key in _EVENT_CATEGORIES}
        self.arrays: dict[str, list[np.ndarray]] = {
            key: [] for key in ("sequence", "monotonic", "listener", "bytes", "duration")}
        self.attributes: list[JsonValue] = []
        self.counts: list[int] = []
        self.wall_start_ns: list[int] = []

    def add(self, records: Sequence[Mapping[str, object]], *, source: Path | None) -> None:
        if records:
            check_version(records[0], source=source, field="contract_version")
            try:
                columns = self._columns(records)
            except KeyError:  # a writer that leaves optional keys out
                columns = self._columns([{**_EVENT_DEFAULTS, **r} for r in records])
            for key, codes in columns.pop("codes").items():
                self.codes[key].extend(codes)
            self.attributes.extend(columns.pop("attributes"))
            for key, values in columns.items():
                self.arrays[key].append(values)
            # The contract derives every timestamp_utc from the trial's wall start plus the
            # monotonic offset, so one parse per file rebuilds them all (within 1 us rounding).
            first = pd.Timestamp(records[0]["timestamp_utc"])
            first = first.tz_localize("UTC") if first.tzinfo is None else first.tz_convert("UTC")
            self.wall_start_ns.append(first.value - int(columns["monotonic"][0]))
        else:
            self.wall_start_ns.append(0)
        self.counts.append(len(records))

    def _columns(self, records: Sequence[Mapping[str, object]]) -> dict[str, Any]:
        n = len(records)
        pcm = list(map(_get_pcm, records))
        present = [p for p in pcm if p]
        where = np.flatnonzero(np.fromiter(map(bool, pcm), dtype=bool, count=n))
        byte_count = np.full(n, -1, dtype=np.int64)
        duration = np.full(n, np.nan)
        byte_count[where] = np.fromiter(map(_get_bytes, present), dtype=np.int64,
                                        count=len(present))
        duration[where] = np.fromiter(map(_get_duration, present), dtype=float,
                                      count=len(present))
        attributes = list(map(_get_attributes, records))
        monotonic = np.fromiter(map(_get_monotonic, records), dtype=np.int64, count=n)
        if records[0].get("listener_offset_ns") is not None:  # then in every record
            listener = np.fromiter(map(_get_listener, records), dtype=np.int64, count=n)
        else:  # schema 1.0: real offsets plus every virtual advance recorded before the event
            advance = np.zeros(n, dtype=np.int64)
            for index, record in enumerate(records):
                if record["event_type"] == VIRTUAL_ADVANCE:
                    advance[index] = int((attributes[index] or {}).get("advance_ns", 0))
            listener = monotonic + np.cumsum(advance) - advance
        return {
            "codes": {key: list(map(table.__getitem__, map(self.getters[key], records)))
                      for key, table in self.tables.items()},
            "attributes": attributes,
            "sequence": np.fromiter(map(_get_sequence, records), dtype=np.int64, count=n),
            "monotonic": monotonic,
            "listener": listener,
            "bytes": byte_count,
            "duration": duration,
        }

    def frame(self) -> pd.DataFrame:
        def joined(key: str, dtype: npt.DTypeLike) -> np.ndarray:
            parts = self.arrays[key]
            return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)

        counts = np.asarray(self.counts, dtype=np.int64)
        n = int(counts.sum())
        monotonic = joined("monotonic", np.int64)
        byte_count = joined("bytes", np.int64)
        event_type = self.tables["event_type"].categorical(self.codes["event_type"])
        attributes = np.empty(n, dtype=object)
        attributes[:] = self.attributes
        wall = np.repeat(np.asarray(self.wall_start_ns, dtype=np.int64), counts) + monotonic
        wall = (wall + 500) // 1000 * 1000  # the recorded strings have microseconds
        columns: dict[str, object] = {
            "sequence": joined("sequence", np.int64),
            "event_type": event_type,
            "turn_id": self.tables["turn_id"].categorical(self.codes["turn_id"]),
            "offset_ms": monotonic / 1e6,
            "listener_ms": joined("listener", np.int64) / 1e6,
            "monotonic_offset_ns": monotonic,
            "timestamp_utc": pd.DatetimeIndex(wall.view("datetime64[ns]")).tz_localize("UTC"),
        }
        for key in ("source", "direction", "speaker_role"):
            columns[key] = self.tables[key].categorical(self.codes[key])
        columns["pcm_byte_count"] = pd.arrays.IntegerArray(byte_count, byte_count < 0)
        columns["pcm_duration_ms"] = joined("duration", float)
        columns["attributes"] = attributes
        return pd.DataFrame(columns)


__all__ = ["EventColumns", "read_events"]
