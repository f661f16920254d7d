"""Column types of the frames: categoricals, nullable booleans and integers, floats, datetimes.

Records decoded from JSON give object columns; these helpers give each column the type its
values have (ids categorical, so child frames repeat them as cheap codes), build a frame from
records with its key columns first even when there are none, and prepend the trials' keys to a
child frame by each row's trial position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ._json import Row

# Counts that stay integers when a turn lacks them (the opening has no input signal).
_INTEGER_SUFFIXES = ("sample_rate_hz", "channels", "byte_count", "peak_amplitude")


def _typed(frame: pd.DataFrame, *, categories: Iterable[str] = (),
           text: Iterable[str] = ()) -> pd.DataFrame:
    """Categoricals for ids, nullable booleans/integers where None mixes in, floats for numbers
    (a column of nothing but None is a float column of NaN unless it is named in ``text``)."""
    for column in frame.columns:
        series = frame[column]
        if column in text:
            continue
        if column in categories:
            frame[column] = series.astype("category")
            continue
        if series.dtype == object:
            kind = pd.api.types.infer_dtype(series, skipna=True)
            if kind == "boolean":
                frame[column] = series.astype("boolean")
            elif kind == "integer" and series.isna().any():
                frame[column] = series.astype("Int64")
            elif kind in ("floating", "mixed-integer-float", "integer"):
                frame[column] = pd.to_numeric(series)
            elif kind == "empty":
                frame[column] = series.astype(float)
        elif series.dtype == float and str(column).endswith(_INTEGER_SUFFIXES):
            values = series.to_numpy()
            finite = values[np.isfinite(values)]
            if np.array_equal(finite, np.round(finite)):
                frame[column] = series.astype("Int64")
    return frame


def _with_datetimes(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("started_at", "ended_at"):
        if column in frame.columns:
            frame[column] = pd.to_datetime(frame[column], format="ISO8601", utc=True,
                                           errors="coerce")
    return frame


def _attach_keys(frame: pd.DataFrame, trials: pd.DataFrame, index: np.ndarray,
                 columns: Sequence[str]) -> pd.DataFrame:
    """Prepend the trials' key columns to a child frame, rows mapped by ``index`` (trial rows)."""
    keys = {}
    for column in columns:
        source = trials[column]
        keys[column] = pd.Categorical.from_codes(source.cat.codes.to_numpy()[index],
                                                 dtype=source.dtype)
    keyed = pd.DataFrame(keys, index=frame.index)
    return pd.concat([keyed, frame.drop(columns=[c for c in columns if c in frame.columns])],
                     axis=1)


def _records_frame(records: list[Row], columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    for column in columns:
        if column not in frame.columns:
            frame[column] = pd.Series(dtype=object)
    ordered = [*columns, *(c for c in frame.columns if c not in columns)]
    return frame[ordered]
