"""What the VAD modules share (test_audio_vad.py, test_audio_vad_stream.py): test signals with
known bounds, and piper's renderings with hand-checked ones (the fixtures that make them,
``office`` and ``piper_speech``, are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from voicelab.audio import FRAME_MS, PcmAudio, StreamingVad, VadTransition, tone_speech

RATE = 24_000
FRAME = RATE * FRAME_MS // 1000
MS = RATE // 1000  # samples per millisecond
OFFICE = Path(__file__).resolve().parents[2] / "examples" / "environment-office.yaml"
TEXTS = ["Yes.", "Hello there, I would like to book a table.",
         "Could you move the meeting to Friday at four, please?"]


def true_bounds(audio: PcmAudio) -> tuple[int, int]:
    """Tone speech is digital zeros around its word bursts: the first and one past the last
    non-zero sample are its exact bounds."""
    voiced = np.flatnonzero(audio.samples)
    return int(voiced[0]), int(voiced[-1]) + 1


def at_active_level(samples: np.ndarray, level_dbfs: float, bounds: tuple[int, int]) -> np.ndarray:
    """``samples`` scaled so the RMS between ``bounds`` (the active speech) is ``level_dbfs``."""
    active = samples[bounds[0]:bounds[1]].astype(np.float64)
    gain = 32768.0 * 10 ** (level_dbfs / 20) / np.sqrt(np.mean(active ** 2))
    return np.round(samples * gain).astype(np.int16)


def white_noise(count: int, *, level_dbfs: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0.0, 32768.0 * 10 ** (level_dbfs / 20), count)).astype(np.int16)


def detect_speech_transitions(samples: np.ndarray, **options) -> list[VadTransition]:
    vad = StreamingVad(**options)
    return vad.push(samples) + vad.finish()


def push_in_chunks(vad: StreamingVad, samples: np.ndarray, sizes: list[int]
                   ) -> list[VadTransition]:
    """Feed ``samples`` in chunks of ``sizes`` (cycled), then finish."""
    transitions, start, index = [], 0, 0
    while start < samples.shape[0]:
        size = sizes[index % len(sizes)]
        transitions += vad.push(samples[start:start + size])
        start += size
        index += 1
    return transitions + vad.finish()


# Hand-checked bounds of piper's default voice (en_US-joe-medium, default settings, which are
# deterministic): (sample count of the rendering, start sample, end sample). Read off plots of
# each waveform at +-1 % of full scale with a 1 ms RMS envelope beside it, one sample per point:
# the start is the first excursion of the first phoneme (before it: digital near-silence, or in
# "Yes." a slow sub-0.2 % drift that is not a speech sound); the end is where the last
# phoneme's voicing or frication gives way to the vocoder's smooth low-level ripple (below
# about 0.3 % of full scale, decaying to -100 dBFS over the next ~100 ms). The final fricatives
# of "Yes." and "please?" fade without a sharp edge; there the reference is the middle of the
# fade, good to about +-5 ms.
PIPER_REFERENCES = {
    "I would like to book a table for two people.": (52_663, 955, 48_270),
    "Yes.": (14_768, 1_395, 10_650),
    "Could you move it to Friday evening, please?": (52_941, 748, 48_300),
}


def stream_signal() -> np.ndarray:
    """Silence, speech, a pause shorter than the hangover, speech, a long pause, a click, speech
    over comfort noise: every kind of transition, in 7 s."""
    first, second = tone_speech(TEXTS[1], seed=1), tone_speech(TEXTS[0], seed=2)
    click = white_noise(20 * MS, level_dbfs=-15.0, seed=5)
    comfort = white_noise(2 * RATE, level_dbfs=-60.0, seed=6)
    comfort[RATE // 2:RATE // 2 + second.num_samples] += second.samples
    return np.concatenate([np.zeros(333, dtype=np.int16), first.samples,
                           np.zeros(300 * MS, dtype=np.int16), second.samples,
                           np.zeros(900 * MS + 17, dtype=np.int16), click,
                           np.zeros(400 * MS, dtype=np.int16), comfort])


#: every kind of transition (``stream_signal``), made once
STREAM = stream_signal()
