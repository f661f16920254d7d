"""Voice activity detection on PCM in 10 ms frames: where speech starts and ends, batch or live.

Three uses, one detector:

- :func:`speech_bounds`: where a user turn's speech starts and ends in its own synthesized audio
  (the leading and trailing near-silence of TTS output is not speech);
- :class:`StreamingVad`: onsets and offsets of speech in a received stream, fed chunks of any
  size in arrival order, causal; every transition carries its exact position in the stream;
- both on a mixed channel (speech over room noise): the noise floor adapts, so stationary
  background is not speech and speech on top of it is.

:func:`detect_speech` gives every segment of a finished buffer; it is one :meth:`StreamingVad.push`
of everything plus :meth:`StreamingVad.finish`, so batch and streaming results agree exactly,
positions and confirmation points alike, however the stream was chunked.

Frames
    The stream is cut into frames of ``FRAME_MS`` = 10 ms (240 samples at 24 kHz) counted from
    its first sample; a frame is judged once all its samples have arrived (a partial last frame
    of a finished stream is not judged). Every reported position is a frame boundary.

Energy backend (the default; deterministic, numpy-vectorized per chunk)
    *Frame level*: the mean square of the frame's samples after removing the frame's mean (so a
    DC offset is not sound), in dBFS: ``10 log10(power / 32768**2)``; a full-scale square wave
    is 0 dBFS, a full-scale sine -3 dBFS, digital silence minus infinity. Computed on integers
    held exactly in float64, so no result depends on chunking or summation order.

    *Noise floor*: the lowest 50 ms mean level (``NOISE_SMOOTHING_MS``, a running mean over
    five frames) within the last ``noise_window_ms`` of the stream, the current frame included.
    It falls at once when the line gets quieter and rises only once a whole window has been
    louder (minimum statistics): speech has pauses and closures within any second, stationary
    noise does not. By default the floor is learned from the stream itself: right for a line
    that carries room noise from its first sample, but a stream that begins in the middle of
    speech judges its first frames against themselves, so its first segment starts late or
    waits for a pause. ``initial_floor_dbfs`` states the floor before the first frame instead.

    A frame is **voiced** when its level exceeds ``min_level_dbfs`` and exceeds the noise floor
    by more than ``threshold_db``.

WebRTC backend (``backend="webrtc"``, optional: ``pip install 'voicelab[vad]'``)
    The stream is decimated by a whole factor to 8 kHz (webrtc's VAD works at 8 kHz internally)
    through a linear-phase FIR (flat to 3.4 kHz, 60 dB down at 4 kHz) whose delay is
    compensated, so 8 kHz frame *k* is stream frame *k*. Each frame is judged by
    ``webrtcvad.Vad(aggressiveness)`` and counts as voiced only if it is also above
    ``min_level_dbfs`` (webrtc alone calls faint noise speech). Decisions lag the stream by the
    filter's delay, ``decision_delay_samples`` (75 samples, 3.1 ms, at 24 kHz), which is added
    to every confirmation point. ``threshold_db``, ``noise_window_ms`` and
    ``initial_floor_dbfs`` do not apply.

Segments (both backends)
    A segment **starts** at the first frame of a run of consecutive voiced frames whose sound
    lasts ``min_speech_ms``. The run's duration is measured below frame resolution: its inner
    frames count whole, its first and newest frames by their energy relative to their inner
    neighbour (at most 1), so a click straddling frame boundaries is not lengthened by the
    frames it touches. The onset is reported once the run has lasted long enough,
    with the position of the run's *first* sample: back-dated, not the moment of confirmation.
    Inside a segment every voiced frame extends it. A segment **ends** at the end of its last
    voiced frame; that offset is confirmed only after ``hangover_ms`` of frames without a voiced
    one (a shorter pause is inside the segment), or by the end of the stream.

Parameters (keyword-only everywhere, with these defaults)
    ``threshold_db`` = 12.0 dB
        how far above the noise floor a voiced frame is. Measured on the office environment's
        hum and babble at the example's volumes (``examples/environment-office.yaml``, 8 seeds
        x 20 s): single frames reach 12.2 dB above the floor, three in a row never 10 dB; tone
        speech mixed at the example's SNR sits 21-25 dB above it (median frame).
    ``min_level_dbfs`` = -50.0 dBFS
        absolute gate: a quieter frame is never speech (-60 dBFS comfort noise is 10 dB below).
        Piper's default voice speaks at an active level of about -25 dBFS; at -30 dBFS its
        syllables stay well above the gate, only the quietest edges of phonemes drop under it.
        The decaying tail of synthesized speech crosses it within a frame or two of the
        audible end.
    ``noise_window_ms`` = 1000.0 ms
        span of the noise-floor minimum (whole frames); longer keeps the floor down through
        longer unbroken speech, shorter follows a rising background sooner (the floor lags a
        rise by this much; until then the louder background is speech).
    ``initial_floor_dbfs`` = None
        the noise floor assumed before the stream's first frame, for its first noise window:
        None learns it from the stream; a low value (e.g. -90.0 dBFS) finds speech in the very
        first frames of a clean stream (a TTS reply fed from its first packet) but calls a
        background that is there from the start speech for the first noise window.
    ``min_speech_ms`` = 30.0 ms
        how long a run of voiced frames must sound to start a segment (see Segments).
    ``hangover_ms`` = 700.0 ms
        silence that confirms an offset (rounded up to whole frames); also the longest pause
        inside one segment.
    ``backend`` = ``"energy"``
        ``"energy"`` or ``"webrtc"``.
    ``aggressiveness`` = 2
        webrtc only: 0 (calls the most frames speech) to 3 (the fewest; it rejects some tone
        speech).
    ``sample_rate_hz`` = 24,000 Hz (:class:`StreamingVad` only; buffers carry their own rate)
        a whole number of samples per 10 ms; the webrtc backend needs a multiple of 8 kHz.

Cost: ``benchmarks/bench_vad.py`` (the figures are in ``benchmarks/README.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._format import CANONICAL_SAMPLE_RATE_HZ, PcmAudio
from ._vad_frames import (
    FRAME_MS,
    NO_FRAMES,
    WEBRTC_SAMPLE_RATE_HZ,
    EnergyFrames,
    WebrtcFrames,
    whole_frames,
)

DEFAULT_THRESHOLD_DB = 12.0
DEFAULT_MIN_LEVEL_DBFS = -50.0
DEFAULT_NOISE_WINDOW_MS = 1000.0
DEFAULT_MIN_SPEECH_MS = 30.0
DEFAULT_HANGOVER_MS = 700.0
DEFAULT_AGGRESSIVENESS = 2
VAD_BACKENDS = ("energy", "webrtc")
MAX_SAMPLE_RATE_HZ = 192_000  # keeps every frame sum an exact integer in float64


@dataclass(frozen=True, slots=True)
class SpeechBounds:
    """Where speech is in a buffer or stream: ``start_sample`` is the first sample of the first
    voiced frame, ``end_sample`` the first sample after the last voiced frame."""

    start_sample: int
    end_sample: int
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ

    @property
    def start_ms(self) -> float:
        return 1000.0 * self.start_sample / self.sample_rate_hz

    @property
    def end_ms(self) -> float:
        return 1000.0 * self.end_sample / self.sample_rate_hz

    @property
    def duration_ms(self) -> float:
        return 1000.0 * (self.end_sample - self.start_sample) / self.sample_rate_hz


@dataclass(frozen=True, slots=True)
class VadTransition:
    """Speech starting (``onset``) or ending (``offset``) in a stream.

    ``sample`` is the position in the stream (onset: the segment's first sample; offset: the
    first sample after its last voiced frame). ``confirmed_sample`` is the stream position from
    which the detector knows it: the onset's run reached ``min_speech_ms``, the offset's
    ``hangover_ms`` of silence passed (or the stream ended). Both count samples from the
    stream's start, never wall time.
    """

    kind: Literal["onset", "offset"]
    sample: int
    confirmed_sample: int
    sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ

    @property
    def position_ms(self) -> float:
        return 1000.0 * self.sample / self.sample_rate_hz

    @property
    def confirmed_ms(self) -> float:
        return 1000.0 * self.confirmed_sample / self.sample_rate_hz


def _check_number(name: str, value: float, *, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value!r}")
    return float(value)


class StreamingVad:
    """Causal voice activity detection over a stream fed in arrival order.

    ``push(samples)`` takes the next chunk (any size, a :class:`PcmAudio` at ``sample_rate_hz``
    or a 1-D int16 array) and returns the transitions it confirmed, in stream order;
    ``finish()`` ends the stream and returns the offset of a segment still open. Parameters and
    units: see the module docstring.
    """

    def __init__(self, *, sample_rate_hz: int = CANONICAL_SAMPLE_RATE_HZ,
                 backend: str = "energy", threshold_db: float = DEFAULT_THRESHOLD_DB,
                 min_level_dbfs: float = DEFAULT_MIN_LEVEL_DBFS,
                 noise_window_ms: float = DEFAULT_NOISE_WINDOW_MS,
                 min_speech_ms: float = DEFAULT_MIN_SPEECH_MS,
                 hangover_ms: float = DEFAULT_HANGOVER_MS,
                 initial_floor_dbfs: float | None = None,
                 aggressiveness: int = DEFAULT_AGGRESSIVENESS):
        if (isinstance(sample_rate_hz, bool) or not isinstance(sample_rate_hz, int)
                or not 0 < sample_rate_hz <= MAX_SAMPLE_RATE_HZ
                or sample_rate_hz * FRAME_MS % 1000):
            raise ValueError(f"sample_rate_hz must be a whole number of Hz up to "
                             f"{MAX_SAMPLE_RATE_HZ} with a whole number of samples in "
                             f"{FRAME_MS} ms, got {sample_rate_hz!r}")
        if backend not in VAD_BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(VAD_BACKENDS)}, got {backend!r}")
        threshold_db = _check_number("threshold_db", threshold_db, low=0.0)
        min_level_dbfs = _check_number("min_level_dbfs", min_level_dbfs, low=-200.0, high=0.0)
        noise_window_ms = _check_number("noise_window_ms", noise_window_ms, low=FRAME_MS)
        min_speech_ms = _check_number("min_speech_ms", min_speech_ms, low=0.0)
        hangover_ms = _check_number("hangover_ms", hangover_ms, low=0.0)
        if initial_floor_dbfs is not None:
            initial_floor_dbfs = _check_number("initial_floor_dbfs", initial_floor_dbfs,
                                               low=-200.0, high=0.0)
        self.sample_rate_hz = sample_rate_hz
        self.backend = backend
        self.frame_samples = sample_rate_hz * FRAME_MS // 1000
        self.min_speech_ms = min_speech_ms
        self.hangover_frames = whole_frames(hangover_ms, at_least=1)
        self._classifier: EnergyFrames | WebrtcFrames
        if backend == "webrtc":
            if (isinstance(aggressiveness, bool) or not isinstance(aggressiveness, int)
                    or not 0 <= aggressiveness <= 3):
                raise ValueError(f"aggressiveness must be 0, 1, 2 or 3, got {aggressiveness!r}")
            if sample_rate_hz % WEBRTC_SAMPLE_RATE_HZ:
                raise ValueError("the webrtc backend needs a sample rate that is a multiple of "
                                 f"{WEBRTC_SAMPLE_RATE_HZ} Hz, got {sample_rate_hz}")
            self._classifier = WebrtcFrames(sample_rate_hz=sample_rate_hz,
                                         aggressiveness=aggressiveness,
                                         min_level_dbfs=min_level_dbfs)
        else:
            self._classifier = EnergyFrames(frame_samples=self.frame_samples,
                                         threshold_db=threshold_db, min_level_dbfs=min_level_dbfs,
                                         noise_window_ms=noise_window_ms,
                                         initial_floor_dbfs=initial_floor_dbfs)
        #: how far behind the stream frame decisions are made (0 for energy, 3 ms for webrtc)
        self.decision_delay_samples = self._classifier.decision_delay_samples
        self.samples_seen = 0
        self.in_speech = False
        self._judged = 0  # frames decided so far
        self._run_start: int | None = None  # first frame of the voiced run the stream ends in
        self._run_energy = NO_FRAMES  # its frames' energies, while no segment is open
        self._voiced_end = 0  # frame after the current segment's last voiced frame
        self._finished = False

    def __repr__(self) -> str:
        return (f"StreamingVad({self.backend}, {self.sample_rate_hz} Hz, "
                f"{self.samples_seen} samples seen, {'in' if self.in_speech else 'no'} speech)")

    @property
    def voiced_until_sample(self) -> int:
        """While in speech: the end of the open segment's last voiced frame so far (a sample
        position in the stream)."""
        return self._voiced_end * self.frame_samples

    @property
    def hangover_samples(self) -> int:
        return self.hangover_frames * self.frame_samples

    def push(self, samples: PcmAudio | np.ndarray) -> list[VadTransition]:
        """Feed the next chunk; returns the onsets and offsets it confirmed."""
        if self._finished:
            raise ValueError("this StreamingVad has finished; start a new one for a new stream")
        samples = self._checked(samples)
        self.samples_seen += samples.shape[0]
        return self._segment(*self._classifier.process(samples))

    def finish(self) -> list[VadTransition]:
        """End the stream: decide what is still pending and close an open segment at the end of
        its last voiced frame (confirmed by the end of the stream)."""
        if self._finished:
            return []
        transitions = self._segment(*self._classifier.flush())
        self._finished = True
        if self.in_speech:
            self.in_speech = False
            transitions.append(self._transition("offset", self._voiced_end, self.samples_seen))
        return transitions

    def _checked(self, samples: PcmAudio | np.ndarray) -> np.ndarray:
        if isinstance(samples, PcmAudio):
            if samples.sample_rate_hz != self.sample_rate_hz:
                raise ValueError(f"chunk is {samples.sample_rate_hz} Hz audio but this detector "
                                 f"takes {self.sample_rate_hz} Hz")
            return samples.samples
        if not isinstance(samples, np.ndarray) or samples.dtype != np.int16 or samples.ndim != 1:
            raise ValueError("samples must be a PcmAudio or a 1-D int16 numpy array, got "
                             f"{samples.dtype if isinstance(samples, np.ndarray) else type(samples).__name__}")
        return samples

    def _transition(self, kind: Literal["onset", "offset"], frame: int,
                    confirmed_sample: int) -> VadTransition:
        return VadTransition(kind, frame * self.frame_samples, confirmed_sample,
                             self.sample_rate_hz)

    def _confirmed(self, frame: int) -> int:
        return frame * self.frame_samples + self.decision_delay_samples

    def _close_if_silent(self, frame: int, out: list[VadTransition]) -> None:
        """Emit the offset when ``frame`` is at least the hangover past the last voiced frame."""
        if self.in_speech and frame - self._voiced_end >= self.hangover_frames:
            self.in_speech = False
            out.append(self._transition("offset", self._voiced_end,
                                        self._confirmed(self._voiced_end + self.hangover_frames)))

    def _segment(self, voiced: np.ndarray, energy: np.ndarray) -> list[VadTransition]:
        """Runs of voiced frames -> segments; a loop over runs (a few per second), not frames."""
        out: list[VadTransition] = []
        base, count = self._judged, voiced.shape[0]
        if count == 0:
            return out
        voiced_at = np.flatnonzero(voiced)
        if voiced_at.shape[0] == 0:  # a quiet chunk
            self._judged = base + count
            self._run_start, self._run_energy = None, NO_FRAMES
            self._close_if_silent(self._judged, out)
            return out
        if (self.in_speech and count <= self.hangover_frames
                and base + int(voiced_at[0]) - self._voiced_end < self.hangover_frames):
            # inside a segment, and every pause so far is shorter than the hangover
            self._judged = base + count
            self._voiced_end = base + int(voiced_at[-1]) + 1
            return out
        breaks = np.flatnonzero(np.diff(voiced_at) > 1)
        starts = voiced_at[np.concatenate([[0], breaks + 1])].tolist()
        ends = (voiced_at[np.concatenate([breaks, [-1]])] + 1).tolist()
        for first, last in zip(starts, ends, strict=True):
            start, end = first + base, last + base
            run_energy = energy[first:last]
            if first == 0 and self._run_start is not None:  # the previous chunk's run goes on
                start = self._run_start
                run_energy = np.concatenate([self._run_energy, run_energy])
            self._close_if_silent(start, out)
            if self.in_speech:
                self._voiced_end = end
                continue
            confirming = _confirming_frame(run_energy, self.min_speech_ms / FRAME_MS)
            if confirming is not None:
                self.in_speech = True
                self._voiced_end = end
                out.append(self._transition("onset", start,
                                            self._confirmed(start + confirming + 1)))
            elif last == count:  # may still grow into speech in the next chunk
                self._run_start, self._run_energy = start, run_energy
        self._judged = base + count
        if not voiced[-1] or self.in_speech:
            self._run_start, self._run_energy = None, NO_FRAMES
        self._close_if_silent(self._judged, out)
        return out


def _confirming_frame(energy: np.ndarray, needed_frames: float) -> int | None:
    """The index of the frame of a voiced run at which its sound has lasted ``needed_frames``
    frames, or None.

    Frames inside the run count whole; its first frame and its newest one may hold only part of
    the sound, and count by their energy relative to their inner neighbour (at most 1): a sound
    that fills a third of a frame puts about a third of its energy there, so a 20 ms click
    straddling three frames counts 2 frames, not 3. Each frame's count depends only on the
    frames before it (causal), and a run is measured in a few vectorized steps.
    """
    count = energy.shape[0]
    if count < needed_frames:  # each frame counts 1 at most
        return None
    if needed_frames <= 1.0 or count == 1:
        return 0 if needed_frames <= 1.0 else None
    edges = np.minimum(energy[1:] / energy[:-1], 1.0)  # frame t against frame t - 1
    first = min(1.0, energy[0] / energy[1])
    lasted = first + np.arange(count - 1) + edges  # at frame t: first, t - 1 inner, newest
    reached = np.flatnonzero(lasted >= needed_frames)
    return int(reached[0]) + 1 if reached.shape[0] else None


#: Samples pushed through the detector at a time by :func:`detect_speech`: its float64 frame
#: sums stay a few megabytes however long the audio, and the result does not depend on it (the
#: detector is exact whatever the chunking).
_DETECT_BLOCK_SAMPLES = 1 << 20


def detect_speech(audio: PcmAudio, *, backend: str = "energy",
                  threshold_db: float = DEFAULT_THRESHOLD_DB,
                  min_level_dbfs: float = DEFAULT_MIN_LEVEL_DBFS,
                  noise_window_ms: float = DEFAULT_NOISE_WINDOW_MS,
                  min_speech_ms: float = DEFAULT_MIN_SPEECH_MS,
                  hangover_ms: float = DEFAULT_HANGOVER_MS,
                  initial_floor_dbfs: float | None = None,
                  aggressiveness: int = DEFAULT_AGGRESSIVENESS) -> list[SpeechBounds]:
    """Every speech segment of ``audio``: what a :class:`StreamingVad` reports when fed the
    whole buffer in one push and finished. Parameters and units: see the module docstring."""
    if not isinstance(audio, PcmAudio):
        raise ValueError(f"audio must be a PcmAudio, got {type(audio).__name__}")
    vad = StreamingVad(sample_rate_hz=audio.sample_rate_hz, backend=backend,
                       threshold_db=threshold_db, min_level_dbfs=min_level_dbfs,
                       noise_window_ms=noise_window_ms, min_speech_ms=min_speech_ms,
                       hangover_ms=hangover_ms, initial_floor_dbfs=initial_floor_dbfs,
                       aggressiveness=aggressiveness)
    transitions = []
    for start in range(0, audio.num_samples, _DETECT_BLOCK_SAMPLES):  # bounded temporaries
        transitions += vad.push(audio.samples[start:start + _DETECT_BLOCK_SAMPLES])
    transitions += vad.finish()
    onsets = [t.sample for t in transitions if t.kind == "onset"]
    offsets = [t.sample for t in transitions if t.kind == "offset"]
    return [SpeechBounds(start, end, audio.sample_rate_hz)
            for start, end in zip(onsets, offsets, strict=True)]


def speech_bounds(audio: PcmAudio, *, backend: str = "energy",
                  threshold_db: float = DEFAULT_THRESHOLD_DB,
                  min_level_dbfs: float = DEFAULT_MIN_LEVEL_DBFS,
                  noise_window_ms: float = DEFAULT_NOISE_WINDOW_MS,
                  min_speech_ms: float = DEFAULT_MIN_SPEECH_MS,
                  hangover_ms: float = DEFAULT_HANGOVER_MS,
                  initial_floor_dbfs: float | None = None,
                  aggressiveness: int = DEFAULT_AGGRESSIVENESS) -> SpeechBounds | None:
    """Where the speech in ``audio`` starts and ends (first segment's start, last segment's
    end), or ``None`` when there is none. Parameters and units: see the module docstring."""
    segments = detect_speech(audio, backend=backend, threshold_db=threshold_db,
                             min_level_dbfs=min_level_dbfs, noise_window_ms=noise_window_ms,
                             min_speech_ms=min_speech_ms, hangover_ms=hangover_ms,
                             initial_floor_dbfs=initial_floor_dbfs,
                             aggressiveness=aggressiveness)
    if not segments:
        return None
    return SpeechBounds(segments[0].start_sample, segments[-1].end_sample, audio.sample_rate_hz)
