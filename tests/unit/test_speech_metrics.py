"""Speech metrics: WER normalization (hand-computed), completeness, STOI/PESQ, DNSMOS guards."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from voicelab.audio import PcmAudio, tone_speech
from voicelab.errors import MissingDependencyError
from voicelab.metrics._speech import (
    dnsmos,
    input_wer,
    intelligibility,
    normalize_text,
    normalize_words,
    speech_metrics_for_turn,
    transcript_completeness,
    word_alignment,
)


def test_normalization_lowercases_strips_punctuation_and_collapses_whitespace():
    assert normalize_text("  Hello,   WORLD!\n It\u2019s  'fine' -- check-in_time. ") == \
        "hello world it's fine check in time"
    assert normalize_words("...?!") == []
    assert normalize_words(None) == []


@pytest.mark.parametrize(("reference", "recognized", "expected"), [
    ("The cat sat on the mat.", "the cat sat on the mat", 0.0),          # only normalization
    ("the cat sat on the mat", "the cat sat on mat", 1 / 6),             # 1 deletion / 6
    ("a b c", "a x c d", 2 / 3),                                          # 1 sub + 1 ins / 3
    ("book a table", "", 1.0),                                           # all deleted
    ("yes", "yes yes yes", 2.0),                                         # 2 insertions / 1
    ("I'd like TWO tickets, please!", "i'd like to tickets please", 1 / 5),  # 1 sub / 5
])
def test_input_wer_hand_computed(reference, recognized, expected):
    assert input_wer(reference, recognized) == pytest.approx(expected)


def test_input_wer_is_none_for_an_empty_reference():
    assert input_wer("", "anything") is None
    assert input_wer(" ,. ", "") is None


def test_word_alignment_counts():
    counts = word_alignment("a b c d", "a x c")
    assert (counts["hits"], counts["substitutions"], counts["deletions"],
            counts["insertions"]) == (2, 1, 1, 0)
    assert counts["wer"] == pytest.approx(0.5)


def test_completeness_from_a_given_recognition():
    result = transcript_completeness(None, "One, two, three, four.", recognized_text="one two four")
    assert result["completeness"] == pytest.approx(0.75)
    assert result["wer_vs_transcript"] == pytest.approx(0.25)
    assert result["flagged"] is False and result["transcript_words"] == 4

    # order-aware: the right words in the wrong order are not all hits
    reordered = transcript_completeness(None, "one two three four",
                                        recognized_text="four three two one")
    assert reordered["completeness"] < 0.5 and reordered["flagged"] is True

    partial = transcript_completeness(None, "your order ships tomorrow morning",
                                      recognized_text="your order", threshold=0.5)
    assert partial["completeness"] == pytest.approx(0.4) and partial["flagged"] is True


def test_completeness_edge_cases():
    assert transcript_completeness(None, "hello")["reason"] == "no product audio"
    empty = transcript_completeness(None, "", recognized_text="something said")
    assert empty["completeness"] is None and empty["flagged"] is False
    assert empty["reason"] == "empty transcript"


def speechlike(text: str = "Please book a table for two at seven tonight") -> PcmAudio:
    return tone_speech(text, seed=7)


def with_noise(audio: PcmAudio, *, noise_rms: float, seed: int = 0) -> PcmAudio:
    rng = np.random.default_rng(seed)
    noisy = audio.samples.astype(np.float64) + rng.normal(0.0, noise_rms, audio.num_samples)
    return PcmAudio(np.clip(np.round(noisy), -32768, 32767).astype(np.int16))


def test_identical_signals_score_at_the_top():
    clean = speechlike()
    result = intelligibility(clean, clean)
    # identical inputs: STOI is exactly 1 up to float rounding; PESQ WB tops out near 4.64
    assert result["stoi"] == pytest.approx(1.0, abs=1e-3)
    assert result["estoi"] == pytest.approx(1.0, abs=1e-3)
    assert result["pesq_wb"] > 4.4
    assert result["reason"] is None and result["pesq_reason"] is None


def test_heavy_noise_lowers_stoi_and_pesq():
    clean = speechlike()
    mild = intelligibility(clean, with_noise(clean, noise_rms=300))
    heavy = intelligibility(clean, with_noise(clean, noise_rms=6000))
    assert heavy["stoi"] < mild["stoi"] < 1.0
    assert heavy["pesq_wb"] < mild["pesq_wb"] < 4.4
    assert heavy["pesq_wb"] < 2.0


def test_intelligibility_aligns_lengths_and_guards_inputs():
    clean = speechlike()
    longer = PcmAudio.concat([clean, PcmAudio.silence(0.5)])
    assert intelligibility(clean, longer)["stoi"] == pytest.approx(1.0, abs=1e-3)
    assert intelligibility(None, clean)["reason"].startswith("needs both")
    short = clean.slice_seconds(0, 0.2)
    assert intelligibility(short, short)["reason"] == "shorter than 0.5 s"
    silent = PcmAudio.silence(2.0)
    assert intelligibility(silent, clean)["reason"] == "the clean speech is silent"


def test_silent_delivery_becomes_reasons_not_exceptions():
    clean = speechlike()
    result = intelligibility(clean, PcmAudio.silence(clean.duration_seconds))
    assert result["pesq_wb"] is None and "PESQ is undefined" in result["pesq_reason"]
    assert result["stoi"] is None or result["stoi"] < 0.1


def test_dnsmos_guards_short_and_silent_audio_without_loading_models():
    assert dnsmos(None)["reason"] == "no audio"
    assert dnsmos(PcmAudio.silence(0.5))["reason"] == "shorter than 1 s"
    assert dnsmos(PcmAudio.silence(2.0))["reason"] == "silent"


def test_turn_entry_by_role():
    clean = speechlike()
    user = speech_metrics_for_turn(role="user", text="book a table", audio=clean,
                                   clean_audio=clean, heard_as="Book a table.")
    assert user["role"] == "user"
    assert user["input_wer"]["wer"] == 0.0 and user["input_wer"]["heard_as"] == "book a table"
    assert user["intelligibility"]["stoi"] == pytest.approx(1.0, abs=1e-3)

    unheard = speech_metrics_for_turn(role="user", text="hi", include={"input_wer"})
    assert unheard["input_wer"]["wer"] is None and "no input transcript" in \
        unheard["input_wer"]["reason"]
    assert "intelligibility" not in unheard

    assistant = speech_metrics_for_turn(role="assistant", text="hello", audio=None)
    assert assistant["completeness"]["reason"] == "no product audio"
    assert assistant["dnsmos"]["reason"] == "no audio"

    with pytest.raises(ValueError, match="role"):
        speech_metrics_for_turn(role="narrator")


def test_missing_package_names_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "jiwer", None)  # makes `import jiwer` fail
    with pytest.raises(MissingDependencyError) as caught:
        input_wer("a b", "a c")
    assert caught.value.message == ("word error rate metrics needs the 'jiwer' package: "
                                    "pip install 'voicelab[speech]'")
