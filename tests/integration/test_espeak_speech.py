"""The eSpeak NG engine (``speech_provider: espeak``): offline speech in several languages and
accents, reproducible from the trial's seed; realistic callers end to end (disfluent words, a
chosen accent, per-turn rate), recorded in the bundle; configurations it cannot speak exit 2."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import voicelab
from voicelab.audio import PcmAudio
from voicelab.config import PersonaSpeech
from voicelab.speech import SpeechContext

pytest.importorskip("espeakng_loader")

from voicelab.speech._espeak import EspeakSpeechProvider  # noqa: E402

REPO = Path(__file__).parents[2]
SEED = REPO / "tests" / "fixtures" / "seed"
RUN = "run-workload-neutral-voice.yaml"
SENTENCES = {"en": "I would like to book a table for two people on Tuesday evening.",
             "de": "Ich möchte am Dienstagabend einen Tisch für zwei Personen reservieren."}
FRAME = 480  # 20 ms at 24 kHz


def _speak(text: str, *, language: str, voice: str | None = None, seed: int = 1,
           speech: PersonaSpeech | None = None) -> tuple[PcmAudio, dict]:
    provider = EspeakSpeechProvider({}, SpeechContext(
        persona_speech=speech or PersonaSpeech(voice=voice), language=language))
    audio = asyncio.run(provider.synthesize(text, voice=None, seed=seed))
    return audio, provider.rendering(text, seed=seed)


def _frame_levels_db(audio: PcmAudio) -> np.ndarray:
    samples = audio.samples.astype(np.float64) / 32768.0
    frames = samples[: samples.size // FRAME * FRAME].reshape(-1, FRAME)
    return 10 * np.log10(np.mean(frames ** 2, axis=1) + 1e-12)


def _assert_speech_like(audio: PcmAudio, words: int) -> None:
    # a few words a second, as people speak (eSpeak's default is 175 words a minute)
    assert 0.2 * words < audio.duration_seconds < 0.7 * words
    levels = _frame_levels_db(audio)
    loud = levels > levels.max() - 30
    assert 0.5 < loud.mean() < 0.98  # mostly sound, with the gaps of speech between words
    assert levels.max() > -20  # peak-normalized to half of full scale
    spectrum = np.abs(np.fft.rfft(audio.samples.astype(np.float64)))
    frequencies = np.fft.rfftfreq(audio.samples.size, 1 / audio.sample_rate_hz)
    voice_band = spectrum[(frequencies > 80) & (frequencies < 4000)].sum()
    assert voice_band / spectrum.sum() > 0.6  # energy where voices are, not noise or hum


def test_espeak_speaks_english_in_two_accents_and_german() -> None:
    rendered = {}
    for language, voice in (("en-US", None), ("en-US", "en-gb-scotland"), ("de", None)):
        text = SENTENCES[language[:2]]
        audio, rendering = _speak(text, language=language, voice=voice)
        _assert_speech_like(audio, len(text.split()))
        rendered[rendering["voice"]] = audio.to_bytes()
    assert set(rendered) == {"gmw/en-US", "gmw/en-GB-scotland", "gmw/de"}
    assert rendered["gmw/en-US"] != rendered["gmw/en-GB-scotland"]  # the accent is heard


def test_same_seed_same_samples_other_seed_other_rate_and_samples() -> None:
    speech = PersonaSpeech(voice="en-gb-scotland", rate_jitter=0.2, pitch_jitter=0.1)
    first, rendering = _speak(SENTENCES["en"], language="en-US", speech=speech, seed=3)
    again, rendering_again = _speak(SENTENCES["en"], language="en-US", speech=speech, seed=3)
    assert first.to_bytes() == again.to_bytes() and rendering == rendering_again
    other, rendering_other = _speak(SENTENCES["en"], language="en-US", speech=speech, seed=4)
    assert rendering_other["rate_wpm"] != rendering["rate_wpm"]
    assert other.to_bytes() != first.to_bytes()


def _suite(folder: Path, *, persona: dict, scenario: dict | None = None,
           speech_provider: str = "espeak") -> Path:
    shutil.copytree(SEED, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name, changes in (("persona-workload-neutral-voice.yaml", persona),
                          ("scenario-workload-neutral-voice.yaml", scenario or {}),
                          (RUN, {"speech_provider": speech_provider})):
        document = yaml.safe_load((folder / name).read_text())
        document.update(changes)
        (folder / name).write_text(yaml.safe_dump(document, sort_keys=False))
    return folder / RUN


CALLER = {"disfluency": {"fillers": 1.0, "restarts": 1.0},
          "speech": {"voice": "en-gb-scotland", "rate_jitter": 0.15}}


def _user_turns(outcome) -> tuple[list[dict], bytes]:
    folder = outcome.bundle_path / outcome.trials[0].report.trial_id
    events = [json.loads(line) for line in (folder / "voice-events.jsonl").open()]
    wanted = ("speech.synthesized", "user.turn_started")
    return [e for e in events if e["event_type"] in wanted], (folder / "user-sent.wav").read_bytes()


def test_a_realistic_caller_end_to_end_is_reproducible_from_the_seed(tmp_path: Path) -> None:
    run_file = _suite(tmp_path / "suite", persona=CALLER)
    outcomes = [voicelab.run(run_file, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path / f"a{index}",
        overrides=[f"trial_seed={seed}"]))
                for index, seed in enumerate((5, 5, 6))]
    assert [outcome.exit_code for outcome in outcomes] == [0, 0, 0]
    (first, first_audio), (again, again_audio), (other, other_audio) = map(_user_turns, outcomes)
    synthesized = first[0]["attributes"]
    started = first[1]["attributes"]
    script_text = "Please record the plan and save the reminder."
    assert started["disfluency"]["script_text"] == script_text
    assert {item["kind"] for item in started["disfluency"]["applied"]} == {"filler", "restart"}
    assert synthesized["text"] == started["text"] != script_text
    assert synthesized["rendering"]["voice"] == "gmw/en-GB-scotland"
    # the same seed: the same words, rate and samples; another seed: others
    assert [e["attributes"] for e in again] == [e["attributes"] for e in first]
    assert again_audio == first_audio
    assert other[0]["attributes"]["rendering"] != synthesized["rendering"]
    assert other_audio != first_audio


def _validate(run_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", "validate", str(run_file)],
                          cwd=run_file.parent, capture_output=True, text=True, timeout=120)


def test_a_scenario_language_espeak_has_no_voice_for_exits_2_naming_the_scenario(
        tmp_path: Path) -> None:
    done = _validate(_suite(tmp_path / "suite", persona={}, scenario={"language": "tlh"}))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "scenario-workload-neutral-voice.yaml" in line and "language" in line
    assert "'tlh'" in line and "Traceback" not in done.stderr


def test_an_unknown_persona_voice_exits_2_naming_the_persona(tmp_path: Path) -> None:
    done = _validate(_suite(tmp_path / "suite", persona={"speech": {"voice": "en-klingon"}}))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "persona-workload-neutral-voice.yaml" in line and "speech.voice" in line


def test_an_accent_of_another_language_than_the_scenarios_exits_2(tmp_path: Path) -> None:
    done = _validate(_suite(tmp_path / "suite", persona={"speech": {"voice": "en-gb-scotland"}},
                            scenario={"language": "de"}))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "scenario-workload-neutral-voice.yaml" in line and "en-gb-scotland" in line


def test_german_with_the_english_piper_voice_exits_2_and_with_espeak_validates(
        tmp_path: Path) -> None:
    pytest.importorskip("piper")
    done = _validate(_suite(tmp_path / "piper", persona={"language": "de"},
                            speech_provider="piper"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "persona-workload-neutral-voice.yaml" in line and "language" in line
    assert _validate(_suite(tmp_path / "espeak", persona={"language": "de"})).returncode == 0


def test_the_hesitant_caller_example_runs(tmp_path: Path) -> None:
    outcome = voicelab.run(REPO / "examples" / "run-hesitant-caller.yaml", voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path))
    assert outcome.exit_code == 0
    turns, _ = _user_turns(outcome)
    assert turns[0]["attributes"]["rendering"]["voice"] == "gmw/en-GB-scotland"
