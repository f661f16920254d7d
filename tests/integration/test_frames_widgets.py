"""The widgets and inline audio, driven programmatically on real bundles (no browser)."""

from __future__ import annotations

import asyncio
import base64
import io
import wave
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile

import voicelab
from voicelab.analysis import (
    Frames,
    LabelingWidget,
    MatrixBrowser,
    TrialPlayer,
    audio_html,
    encode_audio,
    load_frames,
    load_labels,
    read_trial_audio,
    turn_audio_html,
    turn_windows,
    worst_turns,
)
from voicelab.analysis.calibration import HUMAN_LABEL_COLUMNS, read_human_labels

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SUITE = ROOT / "examples" / "sweep-workload-neutral.yaml"


def wav_seconds(data: bytes) -> float:
    """The duration of an audio file in memory (WAV, FLAC or Ogg Opus)."""
    info = soundfile.info(io.BytesIO(bytes(data)))
    assert info.channels == 1
    return info.frames / info.samplerate


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Frames:
    loaded = voicelab.load_run(EXAMPLE)
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path_factory.mktemp("run"))))
    return load_frames(outcome.bundle_path)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Frames:
    outcome = asyncio.run(voicelab.arun_matrix(SUITE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path_factory.mktemp("matrix"))))
    return load_frames(outcome.run_dir)


def test_selecting_a_turn_cuts_the_audio_to_it(run):
    player = TrialPlayer(run, trial_id="trial-002")
    whole = bytes(player.audio.value)
    with wave.open(str(Path(player.row["path"]) / "mixed.wav"), "rb") as handle:
        file_seconds = handle.getnframes() / handle.getframerate()
    assert wav_seconds(whole) == pytest.approx(file_seconds)
    assert [value for _, value in player.turn.options] == [None, "turn-000", "turn-001"]

    player.select_turn("turn-001")
    start_ms, end_ms = player.window_ms
    reply = bytes(player.audio.value)
    assert reply != whole
    # the padded window may run past the end of the recording
    expected_seconds = min(end_ms / 1000, file_seconds) - start_ms / 1000
    assert wav_seconds(reply) == pytest.approx(expected_seconds, abs=1e-3)
    turn = run.turns[(run.turns["trial_id"] == "trial-002") & (run.turns["turn_id"] == "turn-001")]
    # the window runs from just before the user speaks to just after the reply ends
    assert start_ms < turn["user_start_ms"].iloc[0] < turn["playback_end_ms"].iloc[0] < end_ms
    assert "background:#fff3cd" in player.transcript.value  # the selected turn is highlighted
    assert "first_audio_latency_ms" in player.metrics.value

    player.select_channel("user")
    assert bytes(player.audio.value) != reply
    assert wav_seconds(player.audio.value) == pytest.approx(wav_seconds(reply), abs=1e-3)
    player.select_turn(None)
    assert wav_seconds(player.audio.value) == pytest.approx(wav_seconds(whole))
    assert player._repr_mimebundle_()  # displayable


def test_player_opens_a_trial_folder(run):
    trial_dir = run.trial_dir(trial_id="trial-001")
    player = TrialPlayer(trial_dir)
    assert player.row["trial_id"] == "trial-001" and player.trial_dir == trial_dir
    assert "Please record the plan" in player.transcript.value


def test_matrix_browser_follows_cell_and_trial(matrix):
    browser = MatrixBrowser(matrix)
    cells = [value for _, value in browser.cell.options]
    assert len(cells) == 4 and cells == sorted(cells)
    assert browser.player is not None
    first_player = browser.player
    browser.select(cell=cells[2])
    run_id, trial_id = browser.trial.value
    # a cell's run id is "<matrix run id>__<cell>": unique across sweeps, named by its cell
    assert run_id.endswith(f"__{cells[2]}") and trial_id == "trial-001"
    assert browser.player is not first_player
    assert browser.player.row["cell"] == cells[2]
    assert browser.player_box.children == (browser.player.widget,)
    assert "every verdict passed" in browser.summary.value
    with pytest.raises(KeyError):
        browser.select(trial_id="trial-009")


def test_labeling_saves_the_calibration_csv(run, tmp_path):
    labels_path = tmp_path / "labels" / "labels.csv"
    labeler = LabelingWidget(run, labels_path=labels_path, criteria=["polite", "on_topic"],
                             annotator="ana")
    assert labeler.items == [(str(run.trials["run_id"].iloc[0]), "trial-001"),
                             (str(run.trials["run_id"].iloc[0]), "trial-002")]
    labeler.set_label("polite", "pass")
    labeler.set_label("on_topic", "fail")
    labeler.note.value = "drifts, then recovers"
    labeler.save_next_button.click()
    assert labeler.index == 1 and "saved 2 label(s)" in labeler.status.value
    labeler.set_label("polite", "fail")
    rows = labeler.save()  # on_topic left unlabeled: not written
    assert rows["criterion"].tolist() == ["polite"]

    written = read_human_labels(labels_path)
    assert list(written.columns) == list(HUMAN_LABEL_COLUMNS)
    assert written[["trial_id", "criterion", "human_label", "annotator"]].values.tolist() == [
        ["trial-001", "polite", "pass", "ana"], ["trial-001", "on_topic", "fail", "ana"],
        ["trial-002", "polite", "fail", "ana"]]
    assert written["note"].tolist()[0] == "drifts, then recovers"
    assert pd.to_datetime(written["labeled_at"], utc=True).notna().all()

    labeler.previous_button.click()  # back to trial-001: the saved labels come back
    assert labeler.choices["on_topic"].value == "fail"
    assert labeler.note.value == "drifts, then recovers"
    labeler.set_label("on_topic", "pass")
    labeler.save()  # relabeling replaces, never duplicates
    again = load_labels(labels_path)
    assert len(again) == 3
    assert again.set_index(["trial_id", "criterion"]).loc[("trial-001", "on_topic"),
                                                          "human_label"] == "pass"


def test_labeling_refuses_to_save_without_annotator_or_labels(run, tmp_path):
    labeler = LabelingWidget(run, labels_path=tmp_path / "l.csv", annotator="")
    assert labeler.criteria[:2] == ["expected_topics", "expected_exit"]  # no judges: verdicts
    labeler.set_label("concise", "pass")
    labeler.save_button.click()
    assert "annotator" in labeler.status.value and not (tmp_path / "l.csv").exists()
    labeler.annotator.value = "bo"
    labeler.set_label("concise", None)
    with pytest.raises(ValueError, match="at least one"):
        labeler.save()
    labeler.next_button.click()
    labeler.next_button.click()
    assert labeler.index == 1  # clamped at the last trial


@pytest.mark.parametrize(("audio_format", "mime"), [("opus", "audio/ogg"),
                                                     ("flac", "audio/flac"), ("wav", "audio/wav")])
def test_audio_elements_embed_compressed_audio(run, audio_format, mime):
    trial_dir = run.trial_dir(trial_id="trial-001")
    element = audio_html(trial_dir, channel="product", start_ms=0, end_ms=500, caption="opening",
                         audio_format=audio_format)
    prefix = f'src="data:{mime};base64,'
    assert "<audio" in element.data and prefix in element.data
    encoded = element.data.split(prefix, 1)[1].split('"', 1)[0]
    assert wav_seconds(base64.b64decode(encoded)) == pytest.approx(0.5, abs=0.001)


def test_opus_keeps_the_speech_and_is_far_smaller(run):
    samples, rate = read_trial_audio(run.trial_dir(trial_id="trial-001"))
    opus, mime = encode_audio(samples, sample_rate_hz=rate)
    wav, _ = encode_audio(samples, sample_rate_hz=rate, audio_format="wav")
    assert mime == "audio/ogg" and len(opus) * 6 < len(wav)
    decoded, decoded_rate = soundfile.read(io.BytesIO(opus), dtype="int16")
    assert decoded_rate == rate and abs(len(decoded) - len(samples)) <= rate // 50
    # lossy, but the same signal: the envelope of speech survives (correlation of |x|, 20 ms)
    n = min(len(decoded), len(samples)) // 480 * 480
    before = np.abs(samples[:n].astype(float)).reshape(-1, 480).mean(axis=1)
    after = np.abs(decoded[:n].astype(float)).reshape(-1, 480).mean(axis=1)
    assert np.corrcoef(before, after)[0, 1] > 0.95
    # a rate Opus does not take is sent lossless
    _, fallback = encode_audio(samples[:4410], sample_rate_hz=44_100)
    assert fallback == "audio/flac"
    worst = worst_turns(run.turns, n=2)
    assert worst["first_audio_latency_ms"].tolist() == sorted(
        run.turns["first_audio_latency_ms"], reverse=True)[:2]
    block = turn_audio_html(run, worst)
    assert block.data.count("<audio") == 2
    windows = turn_windows(worst)
    assert (windows["end_ms"] > windows["start_ms"]).all()


def test_a_displayed_widget_is_followed_by_its_static_copy(matrix, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects: shown.extend(objects))
    browser = MatrixBrowser(matrix)
    browser._ipython_display_()
    assert shown[0] is browser.widget
    copy = shown[1].data
    assert 'class="voicelab-static-copy"' in copy and ".jp-NotebookPanel" in copy
    assert copy.count("<li>") == 4 + 1  # every cell, the selected cell's one trial
    assert 'src="data:audio/ogg;base64,T2dnUw' in copy  # the selected trial's call
    assert "trial-001" in copy and "every verdict passed" in copy
