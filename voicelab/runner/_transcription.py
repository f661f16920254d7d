"""The product's words: each response's transcript from its wire, or its received audio
recognized locally.

Many wires carry the product's audio only (Twilio Media Streams, most pipecat pipelines), so the
text verdicts (``expected_topics``, ``concise``) and the judges would have nothing to read. The
run's ``transcription.product`` setting says where the words come from (see
:class:`~voicelab.config.TranscriptionConfig`); the recognition runs after the call, in scoring
(never on the receive path), on the audio the bundle keeps, so ``rescore`` reproduces it from
the bundle alone. Each response's transcript says its source: ``wire`` or ``asr:<engine>``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..artifacts import Transcript, TranscriptTurn, Usage, VoiceMetrics
from ..audio import PcmAudio
from ..config import LoadedRun, PersonaConfig, ScenarioConfig, TranscriptionConfig
from ..recording import EventType, Recording, TrialStarted
from ..scoring import text_readers
from ..speech import ASR_ENGINE, ASR_SOURCE, recognize, recognizer_installed

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class ProductTranscription:
    """Which responses of a trial are recognized from their audio."""

    #: ``auto``, ``wire`` or ``asr`` (the run's ``transcription.product``)
    mode: str
    #: a text verdict or a judge reads the product's words (``auto`` recognizes only then)
    words_read: bool

    @classmethod
    def of_run(cls, loaded: LoadedRun) -> ProductTranscription:
        return cls.of(loaded.run.transcription, loaded.scenario, loaded.persona,
                      judges=loaded.run.quality_evaluation is not None)

    @classmethod
    def of(cls, transcription: TranscriptionConfig, scenario: ScenarioConfig,
           persona: PersonaConfig, *, judges: bool) -> ProductTranscription:
        return cls(transcription.product, bool(text_readers(scenario, persona, judges=judges)))

    def recognizes(self, wire_text: str, *, wire_sends_transcripts: bool | None) -> bool:
        """Whether a response whose wire transcript is ``wire_text`` is recognized from its
        audio. ``auto``: only on a wire that sends no transcripts (the adapter's declared
        ``output_transcripts``; ``None``, not recorded: each response without one), only
        when something reads the words, and only when the recognizer is installed."""
        if self.mode == "asr":
            return True
        if self.mode != "auto" or wire_text or not self.words_read or wire_sends_transcripts:
            return False
        return recognizer_installed()

    def to_recognize(self, recording: Recording, transcript: Transcript) -> list[TranscriptTurn]:
        """The responses of ``transcript`` (made from ``recording``) to recognize."""
        sends = wire_sends_transcripts(recording)
        return [turn for turn in transcript.turns if turn.role == "assistant"
                and self.recognizes(turn.text, wire_sends_transcripts=sends)]


def wire_sends_transcripts(recording: Recording) -> bool | None:
    """The adapter's declared ``output_transcripts``, as the trial recorded it when it started
    (``None``: a recording made before it was recorded)."""
    started = next(recording.of_type(EventType.TRIAL_STARTED), None)
    capabilities = TrialStarted.of(started).capabilities if started is not None else None
    if not isinstance(capabilities, dict) or "output_transcripts" not in capabilities:
        return None
    return bool(capabilities["output_transcripts"])


#: The wire's transcripts only (a caller that names no transcription).
WIRE_ONLY = ProductTranscription("wire", words_read=False)


def transcribe_product(recording: Recording, transcript: Transcript, metrics: VoiceMetrics,
                       transcription: ProductTranscription) -> list[Usage]:
    """Fill each response's transcript as ``transcription`` says (the recognized ones from the
    response's received audio), with its source, in ``transcript`` and in the turns of
    ``metrics``; what the recognition used (seconds of audio, one usage per response).
    Blocking CPU work (pocketsphinx, about a fifth of the audio's duration): call it from a
    worker thread in async code."""
    usage: list[Usage] = []
    for turn in transcription.to_recognize(recording, transcript):
        audio = PcmAudio.from_bytes(recording.turn_audio(EventType.PRODUCT_AUDIO, turn.turn_id))
        turn.text = recognize(audio)
        turn.text_source = ASR_SOURCE
        usage.append(Usage(component="recognition", provider=ASR_ENGINE, purpose=turn.turn_id,
                           quantities={"second": round(audio.duration_seconds, 3)}))
        logger.debug("%s recognized from %.2f s of its audio: %r", turn.turn_id,
                     audio.duration_seconds, turn.text)
    responses = {turn.turn_id: turn for turn in transcript.turns if turn.role == "assistant"}
    for entry in metrics.turns:
        response = responses.get(entry.turn_id)
        if response is None:
            continue
        entry.transcript_source = response.text_source
        if response.text_source == ASR_SOURCE:  # the metrics have the wire's words already
            entry.transcript = response.text
    return usage
