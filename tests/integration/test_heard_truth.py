"""What the caller hears, against the bot's own truth: real calls to the Twilio bot double over a
live line, whose bot stamps what it sent and heard on the shared monotonic clock (its JSON lines
in ``product.log``).

- a bot with a long TTS tail: no dead air for it, the tail reported as such;
- a bot that fades out over 130 ms after it decides to stop: the stop latency is the end of
  what the caller can hear;
- a barge-in configured 1.0 s into the reply lands then, to the sample the bot receives;
- a line with a 70 ms constant delay toward the caller adds 70 ms to the latency as heard and
  does not deafen the caller.

Tolerances are the path's (a 20 ms line frame at most) plus what the evaluator itself states a
figure may be off by on this machine (the response's ``stamp_error_bound_ms``, from its own loop
lag): a loaded test machine widens them honestly, and the benchmarks measure the evaluator's
accuracy under load.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_twilio_runs import GREETING, Call, write_call

from voicelab.audio import G711_SAMPLE_RATE_HZ, SILENCE_THRESHOLD
from voicelab.doubles.twilio import TwilioBot

MS = 1_000_000
#: the Twilio adapter's own conversion delay each way, not part of the bot's timing
CONVERSION_MS = 3.625


def _tolerance(turn: dict, base_ms: float) -> float:
    """The path's tolerance plus the evaluator's own stated error for the turn."""
    return base_ms + float(turn["stamp_error_bound_ms"] or 0.0)


def _clock_start_ns(call: Call) -> int:
    return call.events[0]["attributes"]["clock_start_ns"]


def _mono(call: Call, event: dict) -> int:
    """An event's moment on the shared monotonic clock."""
    return _clock_start_ns(call) + event["monotonic_offset_ns"]


def _bot_reply_audio(settings: dict, text: str) -> np.ndarray:
    """The reply exactly as the bot says it (8 kHz)."""
    return TwilioBot(settings).reply_audio(text).samples


def test_a_tts_tail_is_not_dead_air(tmp_path):
    bot = {"greeting": "Hello! How can I help you today?", "hang_up_after_replies": 1,
           "reply_text": "Thank you. That is noted.", "tail_silence_ms": 400}
    call = Call(write_call(tmp_path, bot=bot,
                           script=[{"response": "A table for two tonight, please."}]),
                tmp_path / "runs")
    assert call.exit_code == 0, call.output
    sent = {line["reply"]: line for line in call.bot_lines("reply_sent")}
    for number, turn_id, text in ((0, "turn-000", bot["greeting"]),
                                  (1, "turn-001", bot["reply_text"])):
        turn = call.turn(turn_id)
        audio = _bot_reply_audio(bot, text)
        loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > SILENCE_THRESHOLD)
        # the truth: the bot's own audio has no silence of 300 ms between its first and last
        # sound, and 400 ms (plus the rest of its last frame) after it
        gaps = np.diff(loud) / G711_SAMPLE_RATE_HZ * 1000
        assert gaps.max() < 300
        tail_ms = (audio.size - loud[-1] - 1) / G711_SAMPLE_RATE_HZ * 1000
        # a stall of the evaluator's own (a late stamp) would read as silence; a stall of the
        # bot's own (a busy machine delaying its pacing) is silence the caller really hears
        assert turn["dead_air_ms"] <= _tolerance(turn, sent[number]["most_late_ms"]), \
            (turn, sent[number]["most_late_ms"])
        # the tail as heard: the same, up to the line's frame, and longer by a stall of the
        # bot's own pacing inside it (silence the caller hears)
        late = sent[number]["most_late_ms"]
        assert tail_ms - _tolerance(turn, 20.0) <= turn["trailing_silence_ms"] <= \
            tail_ms + _tolerance(turn, 20.0) + late, (turn, late)


@pytest.fixture(scope="module")
def fading_stop(tmp_path_factory) -> Call:
    folder = tmp_path_factory.mktemp("fade")
    bot = {"greeting": GREETING, "hang_up_after_replies": 1, "reply_text": "Sure.",
           "barge_in_after_ms": 250, "stop_fade_ms": 130}
    return Call(write_call(folder, bot=bot,
                           script=[{"response": "Wait, one thing first.",
                                    "interrupt_after_seconds": 1.0},
                                   # the bot hangs up after its one reply: never said
                                   {"response": "Seven o'clock, please.", "optional": True}],
                           eval_spec={"max_interruption_stop_ms": 800}), folder / "runs")


def test_the_stop_latency_is_what_the_caller_hears_of_a_fade_out(fading_stop):
    call = fading_stop
    assert call.exit_code == 0, call.output
    [clear] = call.bot_lines("clear")
    barge = next(e for e in call.of("user.speech_started") if e["turn_id"] == "turn-001")
    # the truth: from the caller's first sound (as the bot heard it, the adapter's conversion
    # taken out) to the end of the bot's last audible sample (as it sent it, faded)
    truth_ms = (clear["audible_until_ns"] - _mono(call, barge)) / MS - CONVERSION_MS
    greeting = call.turn("turn-000")
    assert greeting["interrupted"] is True
    # a stall of the bot's own pacing (a busy machine) holds the caller's playback back: the
    # caller hears its last sample that much after the bot sent it
    measured, late = greeting["interruption_stop_latency_ms"], clear["most_late_ms"]
    assert truth_ms - _tolerance(greeting, 5.0) <= measured <= \
        truth_ms + _tolerance(greeting, 5.0) + late, (measured, truth_ms, late)
    # ~250 ms to decide, 130 ms of fade: far more than the old speech-segment figure saw
    assert greeting["interruption_stop_latency_ms"] > 300


def test_a_barge_in_starts_when_configured(fading_stop):
    call = fading_stop
    greeting = call.turn("turn-000")
    # as voicelab heard and spoke it: 1.0 s into the reply's speech
    assert greeting["barge_in_after_speech_ms"] == pytest.approx(
        1000.0, abs=_tolerance(greeting, 20.0)), greeting
    # and as the bot sent and received it: its speech's first sample to the caller's first
    # sound, the adapter's conversion each way taken out
    [clear] = call.bot_lines("clear")
    heard = min(line["first_sound_ns"] for line in call.bot_lines("caller_speech_started")
                if line["first_sound_ns"] is not None
                and line["first_sound_ns"] > clear["speech_start_ns"])
    after_ms = (heard - clear["speech_start_ns"]) / MS - 2 * CONVERSION_MS
    # a stall of the bot's own pacing (a busy machine) before the barge-in holds the caller's
    # playback back: the caller hears the reply's first second that much after it was sent
    tolerance, late = _tolerance(greeting, 20.0), clear["most_late_ms"]
    assert 1000.0 - tolerance <= after_ms <= 1000.0 + tolerance + late, (after_ms, late)


def test_a_constant_delay_toward_the_caller_is_latency_not_loss(tmp_path):
    line = {"codec": "mulaw", "jitter": {"jitter_ms": 5, "base_delay_ms": 70}}
    bot = {"greeting": "Hello!", "hang_up_after_replies": 1}
    call = Call(write_call(tmp_path, bot=bot,
                           script=[{"response": "A table for two tonight, please."}],
                           environment={"name": "phone", "impact": 0.0,
                                        "channel": {"to_user": line}}),
                tmp_path / "runs")
    assert call.exit_code == 0, call.output
    answer = call.turn("turn-001")
    assert answer["to_user_loss_rate"] < 0.05, answer  # the jitter buffer absorbs the variation
    assert answer["to_user_delay_ms"] == 70.0
    [sent] = [line for line in call.bot_lines("reply_sent") if line["reply"] == 1]
    ended = next(e for e in call.of("user.speech_ended") if e["turn_id"] == "turn-001")
    # the truth: the bot's first speech sample after the caller's speech ended (as it heard it,
    # the adapter's conversion taken out), plus the path toward the caller
    truth_ms = (sent["speech_start_ns"] - _mono(call, ended)) / MS - CONVERSION_MS + 70.0
    assert answer["response_latency_ms"] == pytest.approx(
        truth_ms, abs=_tolerance(answer, 5.0)), (answer["response_latency_ms"], truth_ms)
