"""The listening user's ear and clock, on signals whose every sample is known: what it keeps of
what it heard, where it hears a reply begin, how a timed utterance is moved to start on time,
and which chunk the live line hands an adapter."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.audio import PcmAudio, SpeechBounds, audible_edges
from voicelab.endpoints._protocol import EndpointContext
from voicelab.endpoints.pipecat import PipecatEndpoint
from voicelab.recording import Recording
from voicelab.runner._heard_speech import RECENT_SAMPLES, HeardSpeech
from voicelab.runner._listening import aligned
from voicelab.runner._trial import DEFAULT_CHUNK_MS, line_chunk_ms
from voicelab.runner._user_speech import Prepared

RATE = 24_000


def test_the_ear_keeps_the_latest_second_whatever_the_feeds():
    rng = np.random.default_rng(7)
    for _ in range(5):
        heard_speech = HeardSpeech(Recording(session_id="s", trace_id="t" * 32, root_span_id="r"),
                          hangover_ms=700.0)
        data = rng.integers(-3000, 3000, 200_000).astype(np.int16)
        fed = 0
        while fed < data.size:
            size = int(rng.integers(1, 30_000))
            heard_speech._keep(data[fed:fed + size])
            heard_speech._heard_samples = fed = min(fed + size, data.size)
            kept = heard_speech._buffer[:heard_speech._kept]
            assert np.array_equal(kept, data[fed - kept.size:fed])
            assert kept.size >= min(fed, RECENT_SAMPLES)


def attack(ms: float, *, peak: float = 8000.0, quiet_ms: float = 40.0) -> np.ndarray:
    """A tone whose first ``quiet_ms`` are a soft attack (audible, but far below its peak)."""
    count = int(RATE * ms / 1000)
    envelope = np.full(count, peak)
    soft = int(RATE * quiet_ms / 1000)
    envelope[:soft] = np.linspace(300.0, 900.0, soft)
    return (envelope * np.sin(np.arange(count) * 2 * np.pi * 200 / RATE)).astype(np.int16)


def test_the_ear_hears_a_reply_begin_at_its_first_audible_sample():
    recording = Recording(session_id="s", trace_id="t" * 32, root_span_id="r",
                          clock_ns=lambda: 0)
    heard_speech = HeardSpeech(recording, hangover_ms=300.0)
    reply = np.concatenate([np.zeros(RATE // 2, dtype=np.int16), attack(600),
                            np.zeros(RATE // 2, dtype=np.int16)])
    for start in range(0, reply.size, 480):  # fed 20 ms at a time, as the listener ticks
        heard_speech._feed(reply[start:start + 480])
    onset, _ = heard_speech.segments[0]
    loud = np.flatnonzero(np.abs(reply.astype(np.int32)) > 256)
    # the first sample above the silence threshold, within the waveform's first half period
    assert loud[0] <= onset <= loud[0] + RATE // 400


def test_audible_edges_follow_a_sound_out_across_short_gaps_only():
    sound = np.zeros(RATE, dtype=np.int16)
    sound[2400:2600] = 1000  # a quiet lead-in, 5 ms before the body
    sound[2720:12000] = 8000
    sound[12100:12300] = 400  # a fade tail 4 ms after it
    sound[20000:21000] = 8000  # another sound, 330 ms later
    assert audible_edges(sound, 3000, 11000) == (2400, 12300)
    # never into a neighbour given as a bound
    assert audible_edges(sound, 3000, 11000, low=2650, high=12050) == (2720, 12000)
    # an edge with nothing audible near it stays
    assert audible_edges(sound, 15000, 16000) == (15000, 16000)


def _prepared(lead_in: int, speech: int) -> Prepared:
    clean = PcmAudio(np.concatenate([np.zeros(lead_in, dtype=np.int16),
                                     np.full(speech, 5000, dtype=np.int16)]))
    return Prepared(clean=clean, info={}, bounds=SpeechBounds(lead_in, lead_in + speech))


@pytest.mark.parametrize(("lead_in", "wanted", "starts_at"),
                         [(2400, 7200, 7200),  # padded: 200 ms of silence in front
                          (2400, 1000, 1000),  # part of its own lead-in trimmed
                          (2400, -500, 0)])  # already late: all of the lead-in trimmed
def test_a_timed_utterance_is_moved_so_its_speech_starts_when_due(lead_in, wanted, starts_at):
    moved = aligned(_prepared(lead_in, 4800), wanted)
    assert moved.bounds is not None
    assert moved.bounds.start_sample == starts_at
    assert moved.bounds.end_sample - moved.bounds.start_sample == 4800
    samples = moved.clean.samples
    assert np.flatnonzero(samples)[0] == starts_at  # the speech itself, never cut
    assert np.count_nonzero(samples) == 4800


def test_the_line_chunk_is_the_adapters_own_default():
    endpoint = PipecatEndpoint({"uri": "ws://127.0.0.1:9/"}, EndpointContext(session_id="s"))
    assert line_chunk_ms(endpoint, {"uri": "ws://127.0.0.1:9/"}) == 20.0  # its model's default
    endpoint = PipecatEndpoint({"uri": "ws://127.0.0.1:9/", "chunk_ms": 40},
                               EndpointContext(session_id="s"))
    assert line_chunk_ms(endpoint, {}) == 40.0
    assert line_chunk_ms(object(), {"chunk_ms": 60}) == 60.0  # a plug-in without a model
    assert line_chunk_ms(object(), {}) == DEFAULT_CHUNK_MS
