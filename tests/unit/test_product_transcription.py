"""The product's words (``transcription.product``): which responses are recognized from their
audio, what the transcript and the metrics say about each one's source, the text verdicts
judged on the recognized words, and the line ``validate`` prints when a text verdict cannot be
judged on an adapter that sends no transcript."""

from __future__ import annotations

from pathlib import Path

import pytest

import voicelab
from voicelab import speech
from voicelab._validate import validate_run
from voicelab.config import MeasurementConfig
from voicelab.errors import MissingDependencyError
from voicelab.recording import (
    EventType,
    ProductText,
    Recording,
    ResponseDone,
    TrialStarted,
    UserTurnStarted,
)
from voicelab.runner import _transcription
from voicelab.runner._evidence import assemble_now, verdicts_of
from voicelab.runner._transcription import ProductTranscription

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN = EXAMPLES / "run-workload-neutral-voice.yaml"  # expected_topics and a concise persona
TWILIO = ["endpoint.adapter=twilio", "endpoint.settings.uri=ws://127.0.0.1:9/",
          "pace_audio=true"]
SAID = "I recorded your daily plan, and I saved the reminder."


def summary_lines(*overrides: str) -> list[str]:
    return validate_run(voicelab.load_run(RUN, overrides=list(overrides))).summary.lines()


def warnings(*overrides: str) -> list[str]:
    return [line for line in summary_lines(*overrides) if line.startswith("warning")]


@pytest.fixture
def no_recognizer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(speech, "recognizer_installed", lambda: False)  # what validate asks
    monkeypatch.setattr(_transcription, "recognizer_installed", lambda: False)  # scoring


# --- validate ---------------------------------------------------------------------------------

def test_validate_says_in_one_line_what_cannot_be_judged_with_transcription_off():
    [line] = warnings(*TWILIO, "transcription.product=wire")
    assert line == ("warning    expected_topics, concise cannot be judged: adapter 'twilio' sends "
                    "no transcript of the product's words and transcription.product is wire; "
                    "to recognize its audio: set transcription.product: auto")


def test_validate_gives_the_install_line_when_the_recognizer_is_missing(no_recognizer):
    [line] = warnings(*TWILIO)
    assert line.endswith("no recognizer is installed; to recognize its audio: "
                         "pip install 'voicelab[speech]'")
    assert "transcript the product's transcripts from the wire (no recognizer installed)" in \
        " ".join(summary_lines(*TWILIO))


def test_nothing_to_warn_about_when_the_audio_is_recognized_or_the_wire_has_transcripts():
    assert warnings(*TWILIO) == []  # auto, with the recognizer installed
    assert warnings("transcription.product=wire") == []  # the fake product sends transcripts
    assert "transcript the product's transcripts from the wire, else its audio recognized " \
           "(asr:pocketsphinx)" in "\n".join(summary_lines(*TWILIO))


def test_asr_without_the_recognizer_is_a_configuration_error(no_recognizer):
    with pytest.raises(MissingDependencyError) as caught:
        summary_lines("transcription.product=asr")
    assert caught.value.key == "transcription.product"
    assert str(caught.value.message).endswith("pip install 'voicelab[speech]'")


def test_an_unknown_transcription_mode_is_a_configuration_error():
    with pytest.raises(voicelab.errors.ConfigError) as caught:
        voicelab.load_run(RUN, overrides=["transcription.product=whisper"])
    assert "transcription.product" in str(caught.value)


# --- which responses are recognized -------------------------------------------------------------

@pytest.mark.parametrize(("mode", "words_read", "wire_text", "sends", "recognized"), [
    ("auto", True, "", False, True),  # a Twilio bot
    ("auto", True, "", None, True),  # a recording that does not say what the wire sends
    ("auto", True, "the wire's words", None, False),
    # a wire that sends transcripts: a response without one (cut off) keeps none
    ("auto", True, "", True, False),
    ("auto", False, "", False, False),  # nothing reads the words: no recognition to pay for
    ("wire", True, "", False, False),
    ("asr", False, "the wire's words", True, True),
])
def test_which_responses_are_recognized(mode, words_read, wire_text, sends, recognized):
    transcription = ProductTranscription(mode, words_read)
    assert transcription.recognizes(wire_text, wire_sends_transcripts=sends) is recognized


def test_auto_recognizes_nothing_without_the_recognizer(no_recognizer):
    assert not ProductTranscription("auto", True).recognizes("", wire_sends_transcripts=False)


# --- the words, from a recording ------------------------------------------------------------------

@pytest.fixture(scope="module")
def spoken() -> bytes:
    pytest.importorskip("piper")
    pytest.importorskip("pocketsphinx")
    from voicelab.speech._piper import PiperSpeechProvider
    from voicelab.speech._protocol import SpeechContext

    return PiperSpeechProvider({}, SpeechContext(base_dir=Path.cwd())) \
        .synthesize_sync(SAID).to_bytes()


def recording_of(spoken: bytes, *, wire_sends_transcripts: bool = False) -> Recording:
    """Two responses: ``turn-000`` audio only (a Twilio bot), ``turn-001`` with the wire's
    transcript of words its audio does not say."""
    recording = Recording(session_id="s", trace_id="0" * 32, root_span_id="0" * 16)
    recording.record(EventType.TRIAL_STARTED,
                     TrialStarted(capabilities={"output_transcripts": wire_sends_transcripts}),
                     source="runner", direction="internal")
    for turn, text in (("turn-000", None), ("turn-001", "the wire says this")):
        for start in range(0, len(spoken), 1920):
            recording.record(EventType.PRODUCT_AUDIO, source="product", direction="inbound",
                             turn_id=turn, speaker_role="assistant",
                             audio=spoken[start:start + 1920])
        if text is not None:
            recording.record(EventType.PRODUCT_TRANSCRIPT, ProductText(text=text),
                             source="product", direction="inbound", turn_id=turn,
                             speaker_role="assistant")
        recording.record(EventType.PRODUCT_RESPONSE_DONE, ResponseDone(status="completed"),
                         source="product", direction="inbound", turn_id=turn,
                         speaker_role="assistant")
    return recording


def words_of(recording: Recording, mode: str) -> list[tuple[str, str | None, str | None]]:
    evidence = assemble_now(recording, adapter="twilio", speech_metrics=False,
                            measurement=MeasurementConfig(),
                            transcription=ProductTranscription(mode, words_read=True))
    said = [(t.text, t.text_source) for t in evidence.transcript.turns]
    sources = [m.transcript_source for m in evidence.metrics.turns]
    assert [m.transcript for m in evidence.metrics.turns] == [text for text, _ in said]
    return [(text, source, metric) for (text, source), metric in zip(said, sources, strict=True)]


@pytest.mark.slow
def test_each_response_says_where_its_words_came_from(spoken):
    recording = recording_of(spoken)
    [(recognized, source, metric), wire] = words_of(recording, "auto")
    assert (source, metric) == ("asr:pocketsphinx", "asr:pocketsphinx")
    assert {"recorded", "daily", "plan", "reminder"} <= set(recognized.split()), recognized
    assert wire == ("the wire says this", "wire", "wire")
    assert words_of(recording, "wire") == [("", None, None), wire]
    # asr: every response from its audio, the wire's words set aside; the same words each time
    assert words_of(recording, "asr") == [(recognized, "asr:pocketsphinx", "asr:pocketsphinx")] * 2
    # auto on a wire that sends transcripts: a response without one keeps none
    assert words_of(recording_of(spoken, wire_sends_transcripts=True), "auto") == \
        [("", None, None), wire]


@pytest.mark.slow
def test_the_text_verdicts_are_judged_on_the_recognized_words(spoken):
    recording = recording_of(spoken)
    loaded = voicelab.load_run(RUN, overrides=[
        "scenario.expected_topics=[daily plan, reminder, weather]",
        "scenario.eval_spec.concise_max_words=5"])
    for mode, status in (("auto", "failed"), ("wire", "failed")):
        evidence = assemble_now(recording, adapter="twilio", speech_metrics=False,
                                measurement=MeasurementConfig(),
                                transcription=ProductTranscription(mode, words_read=True))
        verdicts = {v.name: v for v in verdicts_of(
            evidence, scenario=loaded.scenario, persona=loaded.persona,
            exit_reason="endpoint_completion", outcome_status="not_configured", outcome=None,
            outcome_error=None)}
        topics = verdicts["expected_topics"]
        assert topics.status == status
        if mode == "auto":  # the recognized words hold two topics of three
            assert topics.observed == ["daily plan", "reminder"]
            assert verdicts["concise"].observed >= 8  # the recognized reply's words
        else:  # only the wire's words: no topic in them
            assert topics.observed == []


@pytest.mark.slow
def test_the_speech_metrics_say_why_a_figure_is_missing(spoken):
    recording = recording_of(spoken)
    # a user turn the product answered without saying what it heard (a Twilio bot)
    recording.record(EventType.USER_TURN_STARTED, UserTurnStarted(text=SAID),
                     source="evaluator", direction="outbound", turn_id="turn-001",
                     speaker_role="user")
    recording.record(EventType.USER_AUDIO, source="evaluator", direction="outbound",
                     turn_id="turn-001", speaker_role="user", audio=spoken)
    evidence = assemble_now(recording, adapter="twilio", speech_metrics=True,
                            measurement=MeasurementConfig(),
                            transcription=ProductTranscription("auto", words_read=True))
    recognized, wire = evidence.metrics.turns
    # a recognized transcript is not compared with its own audio
    assert recognized.output_completeness is None
    assert recognized.speech["assistant"]["completeness"]["reason"] == \
        "the transcript is this audio recognized (asr:pocketsphinx)"
    assert wire.output_completeness is not None  # the wire's words against the audio
    # what the product heard is only known when it says so
    assert wire.input_wer is None
    assert wire.speech["user"]["input_wer"]["reason"] == (
        "the product sent no input transcript in this call (a wire without them, e.g. Twilio "
        "Media Streams, never does)")


def test_run_says_what_validate_warns(monkeypatch, caplog, tmp_path):
    import voicelab._run_summary as summary

    said = "expected_topics cannot be judged: (a warning validate prints)"
    real = summary.product_words
    monkeypatch.setattr(summary, "product_words",
                        lambda *args, **kwargs: (real(*args, **kwargs)[0], [said]))
    with caplog.at_level("WARNING", logger="voicelab"):
        voicelab.run(RUN, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path))
    assert said in [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
