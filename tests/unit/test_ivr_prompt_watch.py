"""After a key barge-in, when the prompt is over (runner/_key_prompts.py), over the real
recording, listener and intake with a clock the test moves: the wire's own stop ends it at
once, a prompt still sounding is waited for, and one already silent when the keys went in is
over at once (not held until the response timeout)."""

from __future__ import annotations

import asyncio

import numpy as np

from voicelab.audio import CANONICAL_SAMPLE_RATE_HZ, tone_speech
from voicelab.endpoints import EndpointEvent
from voicelab.recording import Recording
from voicelab.runner._heard_speech import HeardSpeech
from voicelab.runner._intake import Intake
from voicelab.runner._key_prompts import PromptWatch

MS = 1_000_000


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _call(speech_seconds: float) -> tuple[Recording, Intake, HeardSpeech, _Clock]:
    """A prompt (tone speech, then silence) received at once and placed from 0."""
    clock = _Clock()
    recording = Recording(session_id="s", trace_id="t" * 32, root_span_id="r" * 16,
                          clock_ns=clock, start_ns=0)
    intake = Intake(recording, listening=True)
    prompt = tone_speech("for renewals press one, for events press two", seed=3)
    samples = prompt.samples[:int(speech_seconds * CANONICAL_SAMPLE_RATE_HZ)]
    padded = np.concatenate([samples, np.zeros(2 * CANONICAL_SAMPLE_RATE_HZ, dtype=np.int16)])
    recording.record_product_audio(0, "turn-000", padded.tobytes(), None)
    return recording, intake, HeardSpeech(recording, hangover_ms=300), clock


def _watch(recording: Recording, intake: Intake, heard: HeardSpeech, clock: _Clock
           ) -> tuple[PromptWatch, list[int]]:
    checks: list[int] = []

    def check() -> None:  # each look moves the clock on 20 ms
        checks.append(clock.now)
        clock.now += 20 * MS

    return PromptWatch(recording, intake, heard, check), checks


def test_a_prompt_already_silent_at_the_keys_is_over_at_once():
    recording, intake, heard, clock = _call(0.8)
    clock.now = 1500 * MS  # the keys go in after the prompt ended (and its hangover passed)
    watch, checks = _watch(recording, intake, heard, clock)
    asyncio.run(watch.stopped("turn-000", pressed_ns=1500 * MS, deadline_ns=3000 * MS))
    assert len(checks) == 1


def test_a_prompt_still_sounding_is_waited_for_until_it_ends():
    recording, intake, heard, clock = _call(1.5)
    clock.now = 500 * MS
    watch, checks = _watch(recording, intake, heard, clock)
    asyncio.run(watch.stopped("turn-000", pressed_ns=500 * MS, deadline_ns=9000 * MS))
    # over once its speech has ended and the 300 ms hangover passed: not before, not at the
    # deadline
    assert 1500 * MS < checks[-1] < 2500 * MS


def test_the_products_own_stop_ends_the_prompt_at_once():
    recording, intake, heard, clock = _call(1.5)
    clock.now = 600 * MS
    intake.handle(EndpointEvent("interruption", 620 * MS, data={"flush": True}))
    clock.now = 650 * MS
    watch, checks = _watch(recording, intake, heard, clock)
    asyncio.run(watch.stopped("turn-000", pressed_ns=600 * MS, deadline_ns=9000 * MS))
    assert len(checks) == 1
