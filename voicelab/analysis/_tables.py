"""Tables for reports: missing values shown as blank cells, numbers rounded, no index column."""

from __future__ import annotations

from typing import Any

import pandas as pd


def show_table(frame: pd.DataFrame, *, precision: int = 1, percent: tuple[str, ...] = ()
               ) -> Any:
    """A :class:`pandas.io.formats.style.Styler` of ``frame`` for display: NaN/None cells blank
    (not "NaN"), floats to ``precision`` decimals, the ``percent`` columns as percentages, the
    index hidden. Needs jinja2 (installed with the notebooks extra)."""
    formats = {column: "{:.1%}" for column in percent if column in frame.columns}
    return (frame.style.format(precision=precision, na_rep="")
            .format(formats, na_rep="").hide(axis="index"))


__all__ = ["show_table"]
