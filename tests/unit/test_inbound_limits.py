"""The per-connection limits on what a product sends: token buckets and totals, by message type,
and the sample rates an audio frame may declare (checked before any resampling)."""

from __future__ import annotations

import numpy as np
import pytest

from voicelab.config import SecretScrubber
from voicelab.endpoints._limits import InboundBudget, InboundLimits
from voicelab.endpoints.pipecat._wire import PipecatDecoder, encode_frame

SECOND = 1_000_000_000


def test_events_within_the_rate_pass_and_a_storm_is_named_by_its_type() -> None:
    budget = InboundBudget(InboundLimits(events_per_second=10, events_burst=5))
    for tick in range(5):  # 5 a second: within the rate
        assert budget.charge_event("response.text.delta", 10, tick * SECOND // 5) is None
    now = 10 * SECOND
    results = [budget.charge_event("mark", 10, now) for _ in range(7)]
    assert results[:5] == [None] * 5  # the burst
    assert results[5] is not None and "more than 10 events a second" in results[5]
    assert "6 of them mark" in results[5]
    assert budget.charge_event("other", 1, now + 100 * SECOND) == results[5]  # stays over


def test_the_totals_of_events_and_their_bytes_are_bounded() -> None:
    budget = InboundBudget(InboundLimits(max_events=3))
    assert [budget.charge_event("x", 1, n * SECOND) for n in range(3)] == [None] * 3
    assert "more than 3 events" in budget.charge_event("x", 1, 4 * SECOND)
    budget = InboundBudget(InboundLimits(max_event_bytes=2 * 1024 * 1024))
    assert budget.charge_event("big", 1024 * 1024, 0) is None
    assert "exceeded 2 MiB" in budget.charge_event("big", 1024 * 1024 + 1, SECOND)


def test_bytes_a_second_are_charged_before_decoding() -> None:
    budget = InboundBudget(InboundLimits(bytes_per_second=1000, bytes_burst=2000))
    assert budget.charge_message(2000, 0) is None
    assert budget.charge_message(500, SECOND // 2) is None  # refilled 500
    assert "MiB/s" in budget.charge_message(10, SECOND // 2)


@pytest.mark.parametrize("rate", [1, 100, 7_999, 48_001, 10 ** 9])
def test_a_pipecat_frame_declaring_a_rate_outside_the_range_is_refused_unresampled(rate: int
                                                                                   ) -> None:
    decoder = PipecatDecoder(SecretScrubber(), sample_rate_hz=16_000)
    frame = encode_frame("audio", audio=np.zeros(640, dtype="<i2").tobytes(), sample_rate=rate,
                         num_channels=1)
    [event] = decoder.decode(1, frame)
    assert event.type == "error" and event.data["code"] == "resource_limit"
    assert f"{rate:,} Hz" in event.text and event.audio is None


def test_a_pipecat_frame_at_a_wire_rate_is_resampled() -> None:
    decoder = PipecatDecoder(SecretScrubber(), sample_rate_hz=16_000)
    frame = encode_frame("audio", audio=np.ones(1600, dtype="<i2").tobytes(),
                         sample_rate=8_000, num_channels=1)
    events = decoder.decode(1, frame) + decoder.flush_audio()
    assert {e.type for e in events} == {"audio_delta"}
