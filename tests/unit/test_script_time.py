"""How long a script turn lasts at least, and validation refusing a turn that cannot fit in the
trial's time limit: the bound must never exceed what the runner makes of the turn (a legitimate
script is never refused), and be close to it for the tone provider (whose speech is exact)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from voicelab._validate import validate_run
from voicelab.audio import tone_speech
from voicelab.config import PersonaSpeech, load_run, split_pauses
from voicelab.errors import ConfigError
from voicelab.runner._hesitation import join_with_pauses
from voicelab.speech import (
    MIN_SECONDS_PER_WORD,
    SpeechContext,
    ToneSpeechProvider,
    shortest_speech_seconds,
    turn_prosody,
)

RATE = 24_000
TEXTS = ["Please record the plan.", "My account number is {pause: 1.2} 4 4 7 1, thanks",
         "Well {pause: 0.4} I think {pause: 2} it was, um, Tuesday? {pause: 0.3} No: Wednesday!",
         "a {pause: 0.1} b"]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("speech", [None, PersonaSpeech(rate=1.7, rate_jitter=0.3),
                                    PersonaSpeech(rate=0.5, rate_jitter=0.4)])
def test_the_tone_bound_never_exceeds_the_turn_any_seed_makes(text: str,
                                                              speech: PersonaSpeech | None) -> None:
    context = SpeechContext(persona_speech=speech)
    spoken = split_pauses(text)
    bound = sum(spoken.pauses_seconds) + sum(
        shortest_speech_seconds(ToneSpeechProvider, piece, context) for piece in spoken.pieces)
    made = []
    for seed in range(40):
        pieces = []
        for piece in spoken.pieces:
            prosody = turn_prosody(speech, seed=seed, text=piece)
            pieces.append(tone_speech(piece, seed=seed, rate=prosody.rate, pitch=prosody.pitch))
        joined, _ = join_with_pauses(pieces, spoken.pauses_seconds)
        made.append(joined.duration_seconds)
    assert bound <= min(made)
    if speech is None:  # one rate: the bound is the turn less the silence at its two ends
        assert min(made) - bound < 0.5


def test_a_provider_that_says_nothing_is_held_to_a_word_rate() -> None:
    class Quiet:
        pass

    context = SpeechContext()
    assert shortest_speech_seconds(Quiet, "one two three four", context) == \
        pytest.approx(4 * MIN_SECONDS_PER_WORD)
    assert shortest_speech_seconds(Quiet, "", context) == 0.0


def test_without_a_time_limit_a_turn_longer_than_a_trial_is_refused(
        tmp_path: Path, seed_run_with_turn: Callable[..., Path]) -> None:
    # 15,000 words of tone speech: well over an hour
    run = seed_run_with_turn(tmp_path, {"response": "word " * 15_000},
                             limits={"max_time_seconds": None})
    with pytest.raises(ConfigError) as refused:
        validate_run(load_run(run))
    assert refused.value.key == "turns[0].response"
    assert str(refused.value.source).endswith("script-workload-neutral-voice.yaml")
    assert "longer than a trial may last (3,600 s; the scenario sets no max_time_seconds)" \
        in refused.value.message


def test_a_recorded_turn_longer_than_the_limit_is_refused(
        tmp_path: Path, seed_run_with_turn: Callable[..., Path]) -> None:
    import soundfile

    soundfile.write(tmp_path / "long.wav", np.zeros(40 * 8000, np.int16), 8000)
    run = seed_run_with_turn(tmp_path, {"response": "", "audio_path": "long.wav"})
    with pytest.raises(ConfigError) as refused:
        validate_run(load_run(run))
    assert refused.value.key == "turns[0].audio_path"
    assert "lasts 40.0 s" in refused.value.message
