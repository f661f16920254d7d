"""Tables for reports: missing values shown as blank cells, numbers rounded, no index column."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler


def _counts_as_integers(frame: pd.DataFrame, *, keep: tuple[str, ...]) -> pd.DataFrame:
    """Float columns that hold only whole numbers (counts made float by a missing value) as
    nullable integers, so they print ``10``, not ``10.0``."""
    columns = {}
    for column in frame.columns:
        values = frame[column]
        if column in keep or not pd.api.types.is_float_dtype(values):
            continue
        present = values.dropna().to_numpy(dtype=float)
        if present.size and np.all(np.isfinite(present)) and np.all(present == np.round(present)) \
                and np.all(np.abs(present) < 2**53):
            columns[column] = values.astype("Int64")
    return frame.assign(**columns) if columns else frame


def show_table(frame: pd.DataFrame, *, precision: int = 1, percent: tuple[str, ...] = ()
               ) -> Styler:
    """A :class:`pandas.io.formats.style.Styler` of ``frame`` for display: NaN/None cells blank
    (not "NaN"), floats to ``precision`` decimals, whole-number columns as integers, the
    ``percent`` columns as percentages, the index hidden, headers that may break after each
    ``_`` (a page fits the table instead of cutting it). Needs jinja2 (the notebooks extra)."""
    shown = [column for column in percent if column in frame.columns]
    table = _counts_as_integers(frame, keep=tuple(shown))
    styler = table.style.format(precision=precision, na_rep="")
    if shown:  # a subset: the other columns keep the precision above
        styler = styler.format("{:.1%}", subset=shown, na_rep="")
    # a header may break after each "_" (first_audio_latency_ms_p50), never inside a word
    styler = styler.format_index(_breakable_header, axis=1, escape=None)
    return styler.hide(axis="index")


def _breakable_header(name: object) -> str:
    return html.escape(str(name)).replace("_", "_<wbr>")


__all__ = ["show_table"]
