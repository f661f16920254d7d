"""The human label CSV the labeling widget writes (the format :mod:`.calibration` reads).

One row per (run_id, trial_id, criterion, annotator); saving a label again replaces that
annotator's earlier row, so a file never holds the duplicates the calibration reader refuses.
Files are replaced atomically (temporary file, then rename).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from .._atomic import atomic_write
from .calibration import HUMAN_LABEL_COLUMNS, HUMAN_LABELS, read_human_labels, validate_human_labels

_KEY = ["run_id", "trial_id", "criterion", "annotator"]


def utc_timestamp() -> str:
    return datetime.now(tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def label_rows(*, run_id: str, trial_id: str, labels: Mapping[str, str | None], annotator: str,
               note: str = "", labeled_at: str | None = None) -> pd.DataFrame:
    """Rows for one trial: ``labels`` maps criterion -> ``pass``/``fail`` (None: not labeled,
    left out)."""
    if not annotator.strip():
        raise ValueError("an annotator name is required to save labels")
    chosen = {criterion: label for criterion, label in labels.items() if label is not None}
    unknown = sorted({str(label) for label in chosen.values()} - set(HUMAN_LABELS))
    if unknown:
        raise ValueError(f"labels must be 'pass' or 'fail', got {unknown}")
    stamp = labeled_at or utc_timestamp()
    return pd.DataFrame([{"run_id": str(run_id), "trial_id": str(trial_id), "criterion": criterion,
                          "human_label": label, "annotator": annotator.strip(), "note": note,
                          "labeled_at": stamp} for criterion, label in chosen.items()],
                        columns=list(HUMAN_LABEL_COLUMNS))


def load_labels(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The labels saved so far (an empty frame with the columns when the file does not exist)."""
    if not Path(path).is_file():
        return pd.DataFrame(columns=list(HUMAN_LABEL_COLUMNS), dtype=str)
    return read_human_labels(path)


def save_labels(path: str | os.PathLike[str], rows: pd.DataFrame) -> pd.DataFrame:
    """Merge ``rows`` into the CSV at ``path`` (replacing the same annotator's earlier label of
    the same trial and criterion) and return the whole table as written."""
    path = Path(path)
    new = validate_human_labels(rows, source="new labels")
    existing = load_labels(path)
    if not existing.empty:
        replaced = existing.set_index(_KEY).index.isin(new.set_index(_KEY).index)
        existing = existing[~replaced]
    table = pd.concat([existing, new], ignore_index=True) if not existing.empty else new
    table = validate_human_labels(table, source=str(path))
    text = table.to_csv(index=False, columns=list(HUMAN_LABEL_COLUMNS), lineterminator="\n")
    atomic_write(path, text.encode("utf-8"))
    return table


__all__ = ["label_rows", "load_labels", "save_labels", "utc_timestamp"]
