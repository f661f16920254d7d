"""Pure pieces of voicelab.analysis: flattening, typing, event columns, labels, audio slices."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from voicelab.analysis import (
    label_rows,
    load_labels,
    read_trial_audio,
    save_labels,
    turn_windows,
    worst_turns,
)
from voicelab.analysis._bundle_records import _flatten
from voicelab.analysis._embed import wav_bytes
from voicelab.analysis._events import EventColumns
from voicelab.analysis._frame_typing import _typed
from voicelab.analysis._plots import _envelope
from voicelab.analysis.calibration import HUMAN_LABEL_COLUMNS
from voicelab.artifacts import ArtifactVersionError
from voicelab.errors import ConfigError


def test_flatten_prefixes_nested_fields_and_keeps_new_ones():
    turn = {"turn_id": "turn-001", "input": {"peak_amplitude": 3, "extra": {"deep": 1.5}},
            "output": None, "input_wer": 0.25, "tool_calls": 1}
    assert _flatten(turn) == {"turn_id": "turn-001", "input_peak_amplitude": 3,
                              "input_extra_deep": 1.5, "output": None, "input_wer": 0.25,
                              "tool_calls": 1}


def test_typed_picks_nullable_and_categorical_dtypes():
    frame = pd.DataFrame({
        "flag": [True, None, False], "count": [1, None, 3], "ratio": [0.5, None, 1],
        "nothing": [None, None, None], "name": ["a", "b", "a"], "why": [None, None, None],
        "input_byte_count": [None, 2.0, 4.0]}, dtype=object)
    typed = _typed(frame, categories=("name",), text=("why",))
    assert str(typed["flag"].dtype) == "boolean"
    assert str(typed["count"].dtype) == "Int64"
    assert typed["ratio"].dtype == float and typed["nothing"].dtype == float
    assert isinstance(typed["name"].dtype, pd.CategoricalDtype)
    assert typed["why"].dtype == object
    assert str(_typed(pd.DataFrame({"input_byte_count": [np.nan, 2.0]}))
               ["input_byte_count"].dtype) == "Int64"


def _event(sequence, event_type, offset_ns, *, turn_id=None, advance_ns=None, pcm=None):
    return {"contract_version": "1.0", "sequence": sequence, "event_type": event_type,
            "monotonic_offset_ns": offset_ns, "offset_ms": round(offset_ns / 1e6, 3),
            "timestamp_utc": "2026-01-01T00:00:00.000100Z", "turn_id": turn_id,
            "source": "runner", "direction": "internal", "speaker_role": None, "pcm": pcm,
            "attributes": {} if advance_ns is None else {"advance_ns": advance_ns}}


def test_event_columns_put_each_trial_on_its_listener_timeline():
    columns = EventColumns()
    first = [_event(0, "trial.started", 100),
             _event(1, "timeline.virtual_advance", 1_000_000, advance_ns=5_000_000),
             _event(2, "product.audio_chunk", 2_000_000, turn_id="turn-000",
                    pcm={"byte_count": 960, "duration_ms": 20.0})]
    second = [_event(0, "timeline.virtual_advance", 0, advance_ns=7_000_000),
              _event(1, "user.audio_chunk", 3_000_000, turn_id="turn-001")]
    columns.add(first, source=None)
    columns.add([], source=None)  # a trial without events
    columns.add(second, source=None)
    frame = columns.frame()
    # advances count from the event after them, and never leak into the next trial
    np.testing.assert_allclose(frame["listener_ms"], [0.0001, 1.0, 7.0, 0.0, 10.0])
    np.testing.assert_allclose(frame["offset_ms"], [0.0001, 1.0, 2.0, 0.0, 3.0])
    turn_ids = frame["turn_id"]
    assert turn_ids[2] == "turn-000" and pd.isna(turn_ids[3]) and turn_ids[4] == "turn-001"
    assert frame["pcm_byte_count"].tolist()[2] == 960 and pd.isna(frame["pcm_byte_count"][0])
    stamps = pd.DatetimeIndex(frame["timestamp_utc"])
    assert stamps[1] - stamps[0] == pd.Timedelta(microseconds=1000)  # wall start + offset
    assert list(frame["event_type"].cat.categories) == [
        "trial.started", "timeline.virtual_advance", "product.audio_chunk", "user.audio_chunk"]


def test_event_columns_refuse_a_newer_contract():
    newer = _event(0, "trial.started", 0)
    newer["contract_version"] = "4.0"
    with pytest.raises(ArtifactVersionError, match="newer"):
        EventColumns().add([newer], source=None)


def test_label_rows_validate_and_save_upserts(tmp_path):
    with pytest.raises(ValueError, match="annotator"):
        label_rows(run_id="r", trial_id="t", labels={"c": "pass"}, annotator=" ")
    with pytest.raises(ValueError, match="'pass' or 'fail'"):
        label_rows(run_id="r", trial_id="t", labels={"c": "maybe"}, annotator="ana")
    path = tmp_path / "labels.csv"
    assert load_labels(path).columns.tolist() == list(HUMAN_LABEL_COLUMNS)
    first = label_rows(run_id="r", trial_id="t", labels={"a": "pass", "b": None},
                       annotator="ana", note='comma, "quote"\nnewline',
                       labeled_at="2026-01-01T00:00:00Z")
    save_labels(path, first)
    save_labels(path, label_rows(run_id="r", trial_id="t", labels={"a": "fail"},
                                 annotator="bo"))
    table = save_labels(path, label_rows(run_id="r", trial_id="t", labels={"a": "fail"},
                                         annotator="ana"))
    assert len(table) == 2
    back = load_labels(path)
    assert sorted(back["annotator"] + ":" + back["human_label"]) == ["ana:fail", "bo:fail"]
    assert list(path.parent.iterdir()) == [path]  # no temporary files left


def test_audio_slices_read_only_the_window(tmp_path):
    rng = np.random.default_rng(3)
    samples = rng.integers(-2000, 2000, size=24_000, dtype=np.int16)
    (tmp_path / "mixed.wav").write_bytes(wav_bytes(samples, sample_rate_hz=24_000))
    part, rate = read_trial_audio(tmp_path, start_ms=250, end_ms=500)
    assert rate == 24_000
    np.testing.assert_array_equal(part, samples[6000:12000])
    beyond, _ = read_trial_audio(tmp_path, start_ms=900, end_ms=5000)
    assert beyond.size == 2400
    with pytest.raises(ConfigError, match="no product.wav"):
        read_trial_audio(tmp_path, channel="product")


def test_envelope_keeps_peaks():
    samples = np.zeros(48_000, dtype=np.int16)
    samples[12_345] = -32768
    seconds, peaks = _envelope(samples, 24_000)
    assert peaks.max() == 1.0 and seconds[np.argmax(peaks)] == pytest.approx(12_345 / 24_000,
                                                                              abs=0.001)


def test_turn_windows_and_worst_turns():
    turns = pd.DataFrame({"turn_id": ["turn-000", "turn-001", "turn-002"],
                          "user_start_ms": [np.nan, 5000.0, 9000.0],
                          "playback_start_ms": [30.0, 8000.0, np.nan],
                          "playback_end_ms": [4000.0, 8800.0, np.nan],
                          "first_audio_latency_ms": [20.0, 300.0, np.nan]})
    windows = turn_windows(turns, lead_ms=100, tail_ms=100)
    assert windows.values.tolist() == [[0.0, 4100.0], [4900.0, 8900.0], [8900.0, 9100.0]]
    assert worst_turns(turns, n=5)["turn_id"].tolist() == ["turn-001", "turn-000"]
    assert worst_turns(turns, n=1, largest=False)["turn_id"].tolist() == ["turn-000"]


def test_import_stays_light():
    code = ("import sys, voicelab.analysis; heavy = [m for m in ('matplotlib', 'ipywidgets', "
            "'IPython', 'papermill', 'nbconvert') if m in sys.modules]; print(heavy)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_pass_rate_and_curve_tables_leave_interrupted_trials_out():
    from voicelab.analysis import pass_curve_table, pass_rate_table

    trials = pd.DataFrame({
        "persona": pd.Categorical(["a", "a", "a", "b", "b"]),
        "passed": [True, False, False, True, True],
        "exit_reason": ["endpoint_completion", "endpoint_completion", "cancelled",
                        "endpoint_completion", "error"]})
    rates = pass_rate_table(trials, by="persona", method="clopper_pearson", confidence=0.9)
    assert list(rates["n"]) == [2, 2] and list(rates["passed"]) == [1, 2]
    assert list(rates["method"]) == ["clopper_pearson"] * 2
    assert rates["low"].iloc[0] == pytest.approx(0.0253, abs=1e-4)  # beta(0.05; 1, 2)
    curves = pass_curve_table(trials, by="persona")
    a = curves[curves["persona"] == "a"]
    assert list(a["k"]) == [1, 2] and list(a["pass_power_k"]) == [0.5, 0.0]
    assert list(a["pass_at_k"]) == [0.5, 1.0]
    with pytest.raises(ValueError, match="no column 'cell' to group by"):
        pass_rate_table(trials, by="cell")
