"""The selectivity table of runs (run-report.json ``selectivity`` and ``probes``) as frames."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..artifacts import RUN_REPORT, read_json
from ._frames import Frames
from ._json import JsonObject, Row, object_or_empty, objects_in

RATE_COLUMNS = ["run_id", "name", "kind", "probes", "errors", "estimate", "low", "high",
                "method", "confidence", "not_applicable", "stop_ms_p50", "stop_ms_p95",
                "stop_ms_max"]
PROBE_COLUMNS = ["run_id", "trial", "probe_id", "kind", "label", "response_turn_id",
                 "after_product_speech_ms", "product_speaking", "stopped", "stop_ms",
                 "stop_evidence", "speech_after_onset_ms", "correct"]


def _reports(frames: Frames) -> list[tuple[str, JsonObject]]:
    found = []
    for run_id, path in zip(frames.runs["run_id"], frames.runs["path"], strict=True):
        report = Path(str(path)) / RUN_REPORT if isinstance(path, str) else None
        if report is not None and report.is_file():
            found.append((str(run_id), read_json(report)))
    return found


def selectivity_table(frames: Frames) -> pd.DataFrame:
    """One row per run and selectivity rate (false stops on backchannels and on noise, missed
    stops on interruptions) with its interval and the stop times' p50/p95/max in ms; empty when
    no run had probes."""
    rows: list[Row] = []
    for run_id, report in _reports(frames):
        for rate in objects_in(report.get("selectivity")):
            stop = object_or_empty(rate.get("stop_ms"))
            rows.append({**{k: v for k, v in rate.items() if k != "stop_ms"}, "run_id": run_id,
                         "stop_ms_p50": stop.get("p50"), "stop_ms_p95": stop.get("p95"),
                         "stop_ms_max": stop.get("max")})
    return pd.DataFrame(rows, columns=RATE_COLUMNS)


def probes_table(frames: Frames) -> pd.DataFrame:
    """Every probe of the runs with its trial and timing (ms)."""
    rows = [{**probe, "run_id": run_id} for run_id, report in _reports(frames)
            for probe in objects_in(report.get("probes"))]
    return pd.DataFrame(rows, columns=PROBE_COLUMNS)


__all__ = ["probes_table", "selectivity_table"]
