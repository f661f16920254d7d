"""Speech metrics: advisory numbers computed after a conversation from recorded evidence.

* ``input_wer``: word error rate of what the product heard (its input transcript) against the
  words the persona said.
* ``transcript_completeness``: the product's own audio recognized locally (pocketsphinx) and
  compared with the product's transcript: did the audio actually say what the transcript claims?
* ``dnsmos``: DNSMOS P.835 / P.808 quality estimates of the product's audio.
* ``intelligibility``: STOI / ESTOI and wideband PESQ of the delivered user audio (speech mixed
  with the environment) against the clean synthesized speech.
* the product's voice per reply (speech rate, pitch, loudness, pauses, overlap with the user):
  :mod:`voicelab.metrics._product_voice`.

Every function is pure (same evidence, same numbers) and returns JSON-ready values; a metric that
cannot be computed for an input returns ``None`` with a ``reason`` instead of raising. A missing
optional package raises :class:`~voicelab.errors.MissingDependencyError`. Heavy imports (librosa,
numba, onnxruntime) happen inside the functions so the CLI start-up path stays light.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, NotRequired, Required, TypedDict

import numpy as np

from ..audio import SILENCE_THRESHOLD, PcmAudio
from ..errors import MissingDependencyError
from ._metric_audio import METRIC_SAMPLE_RATE_HZ, float_16k
from ._placement import Placement, place_channels
from ._product_voice import add_product_voice_metrics

if TYPE_CHECKING:
    from ..artifacts import VoiceMetrics
    from ..recording import Recording

COMPLETENESS_THRESHOLD = 0.5
#: DNSMOS scores 9.01 s windows (hop 1 s); shorter clips are tiled to one window. Below this
#: the repetition dominates the score.
DNSMOS_MIN_SECONDS = 1.0
DNSMOS_WINDOW_SECONDS = 9.01
#: STOI needs 30 frames (384 ms at its 10 kHz) of speech after dropping silent frames.
INTELLIGIBILITY_MIN_SECONDS = 0.5
USER_METRICS = ("input_wer", "intelligibility")
#: Why a user turn has no ``input_wer``: what the product heard is only known when it says so
#: (its input transcript); the local recognizer's reading of the delivered audio would be
#: another listener's, not the product's (``intelligibility`` measures that audio instead).
NOT_HEARD_IN_TURN = "the product sent no input transcript of this turn"
NOT_HEARD_IN_CALL = ("the product sent no input transcript in this call (a wire without them, "
                     "e.g. Twilio Media Streams, never does)")
ASSISTANT_METRICS = ("completeness", "dnsmos")

_NON_WORD = re.compile(r"[^\w']+|_+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_DNSMOS_LOCK = threading.Lock()


class WordAlignment(TypedDict):
    """Normalized word counts of a hypothesis aligned to its reference."""

    reference_words: int
    hypothesis_words: int
    wer: float | None
    hits: int
    substitutions: int
    deletions: int
    insertions: int


class Completeness(TypedDict):
    """How much of the product's transcript its own audio says (:func:`transcript_completeness`)."""

    recognized_text: str | None
    wer_vs_transcript: float | None
    completeness: float | None
    flagged: bool
    threshold: float
    transcript_words: int
    reason: str | None


class Dnsmos(TypedDict):
    """DNSMOS scores on a 1-5 scale (:func:`dnsmos`)."""

    ovrl_mos: float | None
    sig_mos: float | None
    bak_mos: float | None
    p808_mos: float | None
    duration_seconds: float | None
    tiled: bool
    reason: str | None


class Intelligibility(TypedDict):
    """STOI, ESTOI and wideband PESQ of delivered against clean speech (:func:`intelligibility`)."""

    stoi: float | None
    estoi: float | None
    pesq_wb: float | None
    reason: str | None
    pesq_reason: str | None


class InputWer(TypedDict):
    """The WER of what the product heard against what the persona said."""

    wer: float | None
    heard_as: str | None
    reason: str | None
    reference_words: NotRequired[int]


class TurnSpeechMetrics(TypedDict, total=False):
    """One turn's speech metrics, by the names its role runs (:func:`speech_metrics_for_turn`)."""

    role: Required[str]
    input_wer: InputWer
    intelligibility: Intelligibility
    completeness: Completeness
    dnsmos: Dnsmos
_STOI_FLOOR = 1e-5  # what pystoi returns (with a warning) when too few frames hold speech


def _require(module: str, package: str, purpose: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package, extra="speech", purpose=purpose) from None


# --- words ------------------------------------------------------------------------------------

def normalize_words(text: str | None) -> list[str]:
    """Lowercase words without punctuation: ``"Hello, World!  It's"`` -> hello world it's."""
    if not text:
        return []
    lowered = text.translate(_APOSTROPHES).casefold()
    words = (word.strip("'") for word in _NON_WORD.split(lowered))
    return [word for word in words if word]


def normalize_text(text: str | None) -> str:
    return " ".join(normalize_words(text))


def word_alignment(reference_text: str | None, hypothesis_text: str | None) -> WordAlignment:
    """Normalized word counts of ``hypothesis`` aligned to ``reference`` (jiwer): wer, hits,
    substitutions, deletions, insertions, reference_words. ``wer`` is None for an empty
    reference."""
    reference = normalize_words(reference_text)
    hypothesis = normalize_words(hypothesis_text)
    if not reference:
        return {"reference_words": 0, "hypothesis_words": len(hypothesis), "wer": None,
                "hits": 0, "substitutions": 0, "deletions": 0, "insertions": len(hypothesis)}
    if not hypothesis:
        return {"reference_words": len(reference), "hypothesis_words": 0, "wer": 1.0,
                "hits": 0, "substitutions": 0, "deletions": len(reference), "insertions": 0}
    jiwer = _require("jiwer", "jiwer", "word error rate metrics")
    output = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    return {"reference_words": len(reference), "hypothesis_words": len(hypothesis),
            "wer": float(output.wer), "hits": int(output.hits),
            "substitutions": int(output.substitutions), "deletions": int(output.deletions),
            "insertions": int(output.insertions)}


def input_wer(reference_text: str | None, recognized_text: str | None) -> float | None:
    """WER of what the product recognized against what the persona said (normalized words);
    None when the reference has no words."""
    return word_alignment(reference_text, recognized_text)["wer"]


# --- audio helpers ----------------------------------------------------------------------------

def _is_silent(audio: PcmAudio) -> bool:
    return audio.num_samples == 0 or int(np.max(np.abs(audio.samples.astype(np.int32)))) \
        <= SILENCE_THRESHOLD


def _rounded(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


# --- transcript vs audio ----------------------------------------------------------------------

def transcript_completeness(audio: PcmAudio | None, transcript: str | None, *,
                            threshold: float = COMPLETENESS_THRESHOLD,
                            recognized_text: str | None = None) -> Completeness:
    """How much of the product's ``transcript`` its own ``audio`` actually says.

    ``completeness`` is the fraction of transcript words matched (as hits of an order-aware
    alignment) by the local recognition; ``flagged`` is true when it is below ``threshold``.
    Pass ``recognized_text`` to reuse a recognition already made.
    """
    result: Completeness = {"recognized_text": None, "wer_vs_transcript": None,
                            "completeness": None, "flagged": False, "threshold": threshold,
                            "transcript_words": len(normalize_words(transcript)),
                            "reason": None}
    if recognized_text is None:
        if audio is None or audio.num_samples == 0:
            result["reason"] = "no product audio"
            return result
        from ..speech import recognize

        recognized_text = recognize(audio)
    result["recognized_text"] = normalize_text(recognized_text)
    alignment = word_alignment(transcript, recognized_text)
    if not alignment["reference_words"]:
        result["reason"] = "empty transcript"
        return result
    completeness = alignment["hits"] / alignment["reference_words"]
    wer = alignment["wer"]
    result["wer_vs_transcript"] = None if wer is None else _rounded(wer)
    result["completeness"] = _rounded(completeness)
    result["flagged"] = completeness < threshold
    return result


# --- DNSMOS -----------------------------------------------------------------------------------

def dnsmos(audio: PcmAudio | None) -> Dnsmos:
    """DNSMOS of ``audio``: ovrl_mos, sig_mos, bak_mos (P.835) and p808_mos, on a 1-5 scale.

    Clips shorter than the model's 9.01 s window are repeated to exactly one window (``tiled``
    is true; speechmos itself would tile to a power of two and score every 1 s hop of the
    repetition, several times the work for near-identical windows); clips under
    ``DNSMOS_MIN_SECONDS`` or silent ones get None with a reason.
    """
    result: Dnsmos = {"ovrl_mos": None, "sig_mos": None, "bak_mos": None, "p808_mos": None,
                      "duration_seconds": None, "tiled": False, "reason": None}
    if audio is None or audio.num_samples == 0:
        result["reason"] = "no audio"
        return result
    result["duration_seconds"] = _rounded(audio.duration_seconds, 3)
    if audio.duration_seconds < DNSMOS_MIN_SECONDS:
        result["reason"] = f"shorter than {DNSMOS_MIN_SECONDS:g} s"
        return result
    if _is_silent(audio):
        result["reason"] = "silent"
        return result
    _require("onnxruntime", "onnxruntime", "DNSMOS")
    _require("librosa", "librosa", "DNSMOS")
    _require("requests", "requests", "DNSMOS (speechmos imports it)")
    module = _require("speechmos.dnsmos", "speechmos", "DNSMOS")
    samples = float_16k(audio).astype(np.float64)
    window = int(DNSMOS_WINDOW_SECONDS * METRIC_SAMPLE_RATE_HZ)
    tiled = samples.size < window
    if tiled:
        samples = np.resize(samples, window)
    with _DNSMOS_LOCK:  # speechmos keeps one global model; its sessions are shared
        scores = module.run(samples, sr=METRIC_SAMPLE_RATE_HZ)
    result["ovrl_mos"] = _rounded(scores["ovrl_mos"], 3)
    result["sig_mos"] = _rounded(scores["sig_mos"], 3)
    result["bak_mos"] = _rounded(scores["bak_mos"], 3)
    result["p808_mos"] = _rounded(scores["p808_mos"], 3)
    result["tiled"] = tiled
    return result


# --- intelligibility --------------------------------------------------------------------------

def intelligibility(clean: PcmAudio | None, delivered: PcmAudio | None) -> Intelligibility:
    """STOI, ESTOI (0-1) and wideband PESQ (MOS-LQO, about 1-4.6) of ``delivered`` against
    ``clean``, both at 16 kHz over their common length."""
    result: Intelligibility = {"stoi": None, "estoi": None, "pesq_wb": None, "reason": None,
                               "pesq_reason": None}
    if clean is None or delivered is None or not clean.num_samples or not delivered.num_samples:
        result["reason"] = "needs both the clean and the delivered audio"
        return result
    reference = float_16k(clean).astype(np.float64)
    degraded = float_16k(delivered).astype(np.float64)
    length = min(reference.size, degraded.size)
    reference, degraded = reference[:length], degraded[:length]
    if length < INTELLIGIBILITY_MIN_SECONDS * METRIC_SAMPLE_RATE_HZ:
        result["reason"] = f"shorter than {INTELLIGIBILITY_MIN_SECONDS:g} s"
        return result
    if _is_silent(clean):
        result["reason"] = "the clean speech is silent"
        return result
    pystoi = _require("pystoi", "pystoi", "STOI")
    stoi = float(pystoi.stoi(reference, degraded, METRIC_SAMPLE_RATE_HZ, extended=False))
    estoi = float(pystoi.stoi(reference, degraded, METRIC_SAMPLE_RATE_HZ, extended=True))
    if stoi == _STOI_FLOOR:
        result["reason"] = "too little speech for STOI (under 30 frames)"
    elif not (np.isfinite(stoi) and np.isfinite(estoi)):
        result["reason"] = "STOI is undefined for this input (a silent channel)"
    else:
        result["stoi"], result["estoi"] = _rounded(stoi), _rounded(estoi)
    pesq = _require("pesq", "pesq", "PESQ")
    try:
        score = float(pesq.pesq(METRIC_SAMPLE_RATE_HZ, reference, degraded, "wb"))
    except pesq.PesqError as error:
        result["pesq_reason"] = f"{type(error).__name__}: {error}".rstrip(": ")
    except ValueError:  # pesq 0.0.4 turns an internal NaN into "cannot convert float NaN"
        result["pesq_reason"] = "PESQ is undefined for this input (a silent channel)"
    else:
        if np.isfinite(score):
            result["pesq_wb"] = _rounded(score, 3)
        else:
            result["pesq_reason"] = "PESQ is undefined for this input"
    return result


# --- one turn ---------------------------------------------------------------------------------

def speech_metrics_for_turn(*, role: str, text: str | None = None,
                            audio: PcmAudio | None = None, heard_as: str | None = None,
                            clean_audio: PcmAudio | None = None,
                            completeness_threshold: float = COMPLETENESS_THRESHOLD,
                            include: Collection[str] | None = None) -> TurnSpeechMetrics:
    """The speech metrics of one recorded turn, as a JSON-ready dict (advisory; no verdicts).

    * ``role="user"``: ``text`` is what the persona said, ``audio`` the delivered (mixed) audio,
      ``clean_audio`` the synthesized speech before mixing and ``heard_as`` the product's input
      transcript. Metrics: ``input_wer``, ``intelligibility``.
    * ``role="assistant"``: ``text`` is the product's transcript and ``audio`` its audio.
      Metrics: ``completeness``, ``dnsmos``.

    ``include`` limits which metrics run (default: all of the role). Blocking CPU work (about
    0.1-0.5 s a turn): call it from a worker thread in async code.
    """
    if role == "user":
        names = USER_METRICS
    elif role == "assistant":
        names = ASSISTANT_METRICS
    else:
        raise ValueError(f"role must be 'user' or 'assistant', got {role!r}")
    selected = [name for name in names if include is None or name in include]
    metrics: TurnSpeechMetrics = {"role": role}
    if "input_wer" in selected:
        if heard_as is None:
            metrics["input_wer"] = {"wer": None, "heard_as": None,
                                    "reason": "the endpoint reported no input transcript"}
        else:
            alignment = word_alignment(text, heard_as)
            wer = alignment["wer"]
            metrics["input_wer"] = {
                "wer": None if wer is None else _rounded(wer),
                "heard_as": normalize_text(heard_as),
                "reference_words": alignment["reference_words"],
                "reason": "empty reference" if wer is None else None}
    if "intelligibility" in selected:
        metrics["intelligibility"] = intelligibility(clean_audio, audio)
    if "completeness" in selected:
        metrics["completeness"] = transcript_completeness(audio, text,
                                                          threshold=completeness_threshold)
    if "dnsmos" in selected:
        metrics["dnsmos"] = dnsmos(audio)
    return metrics


def add_speech_metrics(recording: Recording, metrics: VoiceMetrics, *, placement: Placement | None = None
                       ) -> None:
    """Advisory speech metrics of every response of ``recording`` (a
    :class:`~voicelab.recording.Recording`) added to ``metrics`` (its
    :class:`~voicelab.artifacts.VoiceMetrics`): the WER of what the product heard and the
    intelligibility of the delivered user audio for user turns, completeness and DNSMOS of the
    product's audio, and the product's voice as the listener heard it
    (:mod:`voicelab.metrics._product_voice`, on ``placement``, the recording's
    :class:`~voicelab.metrics.Placement`: rendered again when not given). Seconds of numeric
    work: call it from a worker thread in async code."""
    from ..recording import (
        PRODUCT,
        USER,
        USER_CLEAN,
        EventType,
        ProductText,
        UserTurnStarted,
    )

    said: dict[str, str] = {}
    heard: dict[str, list[str]] = {}
    clean: dict[str, PcmAudio] = {}
    chunks: dict[tuple[str, str], list[Any]] = {}
    for event in recording.events:
        turn = event.turn_id
        if turn is None:
            continue
        if event.type is EventType.USER_TURN_STARTED:
            said[turn] = UserTurnStarted.of(event).text or ""
        elif event.type is EventType.PRODUCT_INPUT_TRANSCRIPT:
            heard.setdefault(turn, []).append(ProductText.of(event).text or "")
        elif event.type is EventType.SPEECH_SYNTHESIZED and event.audio_samples:
            clean[turn] = PcmAudio(recording.streams[USER_CLEAN].samples(
                event.audio_start, event.audio_samples))
        elif event.type is EventType.USER_AUDIO:
            chunks.setdefault((USER, turn), []).append(event)
        elif event.type is EventType.PRODUCT_AUDIO:
            chunks.setdefault((PRODUCT, turn), []).append(event)

    def joined(direction: str, turn: str) -> PcmAudio | None:
        events = chunks.get((direction, turn))
        if not events:
            return None
        stream = recording.streams[direction]
        return PcmAudio(np.concatenate([stream.samples(e.audio_start, e.audio_samples)
                                        for e in events]))

    for entry in metrics.turns:
        speech: dict[str, object] = {}
        if entry.turn_id in said:
            parts = heard.get(entry.turn_id)
            user = speech["user"] = speech_metrics_for_turn(
                role="user", text=said[entry.turn_id], audio=joined(USER, entry.turn_id),
                clean_audio=clean.get(entry.turn_id), heard_as=" ".join(parts) if parts else None)
            if parts is None:
                user["input_wer"]["reason"] = NOT_HEARD_IN_TURN if heard else NOT_HEARD_IN_CALL
            entry.input_wer = user["input_wer"]["wer"]
            entry.input_stoi = user["intelligibility"]["stoi"]
            entry.input_pesq_wb = user["intelligibility"]["pesq_wb"]
        audio = joined(PRODUCT, entry.turn_id)
        if audio is not None and audio.num_samples:
            recognized = (entry.transcript_source or "").startswith("asr:")
            assistant = speech["assistant"] = speech_metrics_for_turn(
                role="assistant", text=entry.transcript, audio=audio,
                include=("dnsmos",) if recognized else None)
            if recognized:  # the transcript is this audio recognized: nothing to compare
                completeness = transcript_completeness(None, None,
                                                       recognized_text=entry.transcript)
                completeness["reason"] = (f"the transcript is this audio recognized "
                                          f"({entry.transcript_source})")
                assistant["completeness"] = completeness
            entry.output_completeness = assistant["completeness"]["completeness"]
            entry.output_completeness_flagged = assistant["completeness"]["flagged"]
            entry.output_dnsmos_ovrl = assistant["dnsmos"]["ovrl_mos"]
        entry.speech = speech
    add_product_voice_metrics(recording, metrics,
                              placement if placement is not None else place_channels(recording))
