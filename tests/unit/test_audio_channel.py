"""The telephony channel model: seeded loss, its statistics, jitter, concealment and codecs."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from pydantic import ValidationError

from voicelab.audio import (
    Channel,
    ChannelStats,
    ChannelStream,
    PcmAudio,
    tone_speech,
)
from voicelab.config._channel import (
    ChannelConfig,
    ConcealmentConfig,
    GilbertElliottLoss,
    IndependentLoss,
    JitterConfig,
    LineConfig,
    OpusConfig,
)
from voicelab.errors import MissingDependencyError

RATE_HZ = 24_000
Z_999 = 3.2905  # two-sided 99.9 % normal quantile
SENTENCE = "Please record the plan and save the reminder, then read it back to me."


def wilson_interval(phat: float, trials: float, *, z: float = Z_999) -> tuple[float, float]:
    """Wilson score interval of a measured proportion ``phat`` over ``trials`` (which may be an
    effective, non-integer count)."""
    denominator = 1 + z * z / trials
    centre = (phat + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(phat * (1 - phat) / trials + z * z / (4 * trials * trials)) / denominator
    return centre - half, centre + half


def noise(seconds: float, *, seed: int, level: float = 3000.0) -> PcmAudio:
    rng = np.random.default_rng(seed)
    count = int(seconds * RATE_HZ)
    return PcmAudio(np.clip(rng.normal(0, level, count), -32768, 32767).astype(np.int16))


def tone(frequency_hz: float, *, seconds: float = 1.0, amplitude: float = 8000.0) -> PcmAudio:
    t = np.arange(int(seconds * RATE_HZ)) / RATE_HZ
    return PcmAudio(np.rint(amplitude * np.sin(2 * np.pi * frequency_hz * t)).astype(np.int16))


def lost_pattern(config: LineConfig, *, packets: int, seed: int,
                 direction: str = "to_product") -> np.ndarray:
    """Losses of ``packets`` packets of silence through a PCM line (latency 0, no padding)."""
    channel = Channel(config, seed=seed, direction=direction)  # type: ignore[arg-type]
    samples_per_packet = RATE_HZ * config.packet_ms // 1000
    result = channel.process(PcmAudio(np.zeros(packets * samples_per_packet, dtype=np.int16)))
    assert len(result.packets) == packets
    return np.array([record.lost for record in result.packets])


def run_lengths(flags: np.ndarray) -> np.ndarray:
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return edges[1::2] - edges[::2]


# --- configuration ---------------------------------------------------------------------------

def test_config_forbids_unknown_keys_and_misplaced_opus_settings() -> None:
    with pytest.raises(ValidationError, match="packet_size"):
        LineConfig.model_validate({"codec": "mulaw", "packet_size": 20})
    with pytest.raises(ValidationError, match="'opus' settings are given but codec is 'alaw'"):
        LineConfig.model_validate({"codec": "alaw", "opus": {"bitrate_bps": 16000}})
    with pytest.raises(ValidationError, match="packet_ms"):
        LineConfig.model_validate({"packet_ms": 25})
    with pytest.raises(ValidationError):
        LineConfig.model_validate({"loss": {"model": "gilbert_elliott", "p": 0.1, "r": 0.0}})
    config = ChannelConfig.model_validate({
        "to_product": {"codec": "mulaw", "loss": {"model": "independent", "rate": 0.05},
                       "jitter": {"jitter_ms": 10}, "concealment": {"policy": "repeat"}},
    })
    assert config.to_user is None
    assert isinstance(config.to_product.loss, IndependentLoss)
    assert LineConfig().is_clean and not config.to_product.is_clean


def test_gilbert_elliott_parameters_say_what_they_mean() -> None:
    classic = GilbertElliottLoss(p=0.02, r=0.25)
    assert classic.stationary_loss_rate == pytest.approx(0.02 / 0.27)
    assert classic.mean_bad_run_packets == pytest.approx(4.0)
    general = GilbertElliottLoss(p=0.1, r=0.4, loss_in_good=0.01, loss_in_bad=0.6)
    assert general.stationary_loss_rate == pytest.approx((0.4 * 0.01 + 0.1 * 0.6) / 0.5)


# --- a clean line and reproducibility --------------------------------------------------------

def test_an_absent_direction_is_a_clean_line() -> None:
    speech = tone_speech(SENTENCE, seed=3)
    channel = Channel(ChannelConfig().to_product, seed=1)
    result = channel.process(speech, turn_id=1)
    np.testing.assert_array_equal(result.audio.samples, speech.samples)
    assert result.stats.packets_dropped == 0 and result.stats.effective_loss_rate == 0.0
    assert channel.latency_ms == 0.0


@pytest.mark.parametrize("codec", ["pcm", "mulaw", "alaw"])
def test_same_seed_same_audio_and_losses_other_seed_other_losses(codec: str) -> None:
    config = LineConfig(codec=codec, loss=GilbertElliottLoss(p=0.05, r=0.3),
                        jitter=JitterConfig(jitter_ms=15),
                        concealment=ConcealmentConfig(policy="repeat"))
    speech = tone_speech(SENTENCE, seed=3)
    first = Channel(config, seed=42).process(speech)
    again = Channel(config, seed=42).process(speech)
    other = Channel(config, seed=43).process(speech)
    assert first.audio.to_bytes() == again.audio.to_bytes()
    assert first.packets == again.packets
    assert [p.lost for p in first.packets] != [p.lost for p in other.packets]
    assert first.audio.to_bytes() != other.audio.to_bytes()


def test_directions_and_jitter_draw_from_their_own_streams() -> None:
    lossy = LineConfig(loss=IndependentLoss(rate=0.2))
    to_product = lost_pattern(lossy, packets=500, seed=9)
    to_user = lost_pattern(lossy, packets=500, seed=9, direction="to_user")
    with_jitter = lost_pattern(lossy.model_copy(update={"jitter": JitterConfig(jitter_ms=30)}),
                               packets=500, seed=9)
    assert not np.array_equal(to_product, to_user)
    np.testing.assert_array_equal(to_product, with_jitter)  # jitter did not move a single loss


def test_loss_state_runs_on_across_turns() -> None:
    """Gilbert-Elliott bursts span turn boundaries: 50 turns of 7 packets lose exactly the
    packets one 350-packet turn loses (PCM, whole packets, so no padding between turns)."""
    config = LineConfig(loss=GilbertElliottLoss(p=0.1, r=0.2))
    whole = lost_pattern(config, packets=350, seed=5)
    channel = Channel(config, seed=5)
    turn = PcmAudio(np.zeros(7 * 480, dtype=np.int16))
    in_turns = np.concatenate([[p.lost for p in channel.process(turn, turn_id=k).packets]
                               for k in range(50)])
    np.testing.assert_array_equal(in_turns, whole)
    assert any(whole[7 * k - 1] and whole[7 * k] for k in range(1, 50))  # a burst crossed one


# --- loss statistics over a long run ---------------------------------------------------------

def test_independent_loss_rate_is_within_the_binomial_interval() -> None:
    rate, packets = 0.05, 100_000
    lost = lost_pattern(LineConfig(loss=IndependentLoss(rate=rate), packet_ms=10),
                        packets=packets, seed=2024)
    low, high = wilson_interval(float(lost.mean()), packets)
    assert low <= rate <= high, f"measured {lost.mean():.5f}, interval [{low:.5f}, {high:.5f}]"


@pytest.mark.parametrize("loss", [GilbertElliottLoss(p=0.01, r=0.3),
                                  GilbertElliottLoss(p=0.05, r=0.4, loss_in_good=0.01,
                                                     loss_in_bad=0.7)],
                         ids=["classic", "general"])
def test_gilbert_elliott_loss_rate_is_within_the_interval_of_the_stationary_rate(
        loss: GilbertElliottLoss) -> None:
    """Wilson 99.9 % interval with the effective number of independent packets.

    Gilbert-Elliott losses are positively correlated: in the classic case the loss indicator is
    the chain's state, whose autocorrelation at lag j is lambda**j with lambda = 1 - p - r, so the
    variance of the mean is the binomial one times (1 + lambda) / (1 - lambda). The plain
    binomial interval would be too narrow by that factor's square root (2.3 for p=0.01, r=0.3);
    dividing n by it makes the interval honest. In the general case the correlation is weaker,
    so the same count is conservative.
    """
    packets = 100_000
    lost = lost_pattern(LineConfig(loss=loss, packet_ms=10), packets=packets, seed=77)
    correlation = 1 - loss.p - loss.r
    effective = packets * (1 - correlation) / (1 + correlation)
    low, high = wilson_interval(float(lost.mean()), effective)
    assert low <= loss.stationary_loss_rate <= high, (
        f"measured {lost.mean():.5f}, stationary {loss.stationary_loss_rate:.5f}, "
        f"interval [{low:.5f}, {high:.5f}]")


def test_gilbert_elliott_bursts_are_geometric_with_mean_one_over_r() -> None:
    """Classic model: a loss burst is a stay in the bad state, geometric with mean 1/r = 3.33.

    With p=0.01, r=0.3 over 100,000 packets there are about 970 bursts; the burst length's
    standard deviation is sqrt(1-r)/r = 2.8, so the mean's standard error is about 0.09 and
    the 10 % tolerance (0.33) is 3.7 standard errors. P(length 1) = r has standard error
    sqrt(r(1-r)/970) = 0.015; the tolerance 0.05 is 3.4 of them.
    """
    loss = GilbertElliottLoss(p=0.01, r=0.3)
    lost = lost_pattern(LineConfig(loss=loss, packet_ms=10), packets=100_000, seed=31)
    bursts = run_lengths(lost)
    assert bursts.size > 800
    np.testing.assert_allclose(bursts.mean(), loss.mean_bad_run_packets, rtol=0.10)
    np.testing.assert_allclose(np.mean(bursts == 1), loss.r, atol=0.05)
    independent = lost_pattern(LineConfig(loss=IndependentLoss(rate=lost.mean()), packet_ms=10),
                               packets=100_000, seed=31)
    assert run_lengths(independent).mean() < 1.1  # the same rate without memory: no bursts


# --- statistics per turn ---------------------------------------------------------------------

def test_stats_per_turn_count_every_packet_once() -> None:
    channel = Channel(LineConfig(codec="mulaw", loss=IndependentLoss(rate=0.3)), seed=4)
    turns = [tone_speech(text, seed=index) for index, text in
             enumerate(["Hello there.", "Yes.", "Please move the meeting to Friday."])]
    results = [channel.process(turn, turn_id=f"turn-{index}") for index, turn in enumerate(turns)]
    stats = channel.stats()
    assert [s.turn_id for s in stats] == ["turn-0", "turn-1", "turn-2"]
    for result, turn_stats, turn in zip(results, stats, turns, strict=True):
        assert result.stats == turn_stats
        # the turn's packets cover its audio plus the codec's latency, drained with silence
        expected = math.ceil((turn.num_samples + round(channel.latency_ms * 24)) / 480)
        assert turn_stats.packets_sent == expected
        assert turn_stats.packets_dropped == sum(p.lost for p in result.packets)
        assert turn_stats.effective_loss_rate == turn_stats.packets_dropped / expected
    total = channel.total_stats()
    assert total.packets_sent == sum(s.packets_sent for s in stats) == len(channel.records)
    assert [r.index for r in channel.records] == list(range(total.packets_sent))
    assert set(total.to_dict()) >= {"packets_sent", "packets_dropped", "effective_loss_rate"}
    assert ChannelStats.of([], turn_id=None).effective_loss_rate is None


# --- jitter ----------------------------------------------------------------------------------

def test_jitter_delays_keep_packets_in_order() -> None:
    """Exponential jitter with a mean of 40 ms on 20 ms packets: big delays hold later packets
    back (first in, first out), so arrival times never decrease and no delay is below base."""
    config = LineConfig(loss=IndependentLoss(rate=0.1),
                        jitter=JitterConfig(jitter_ms=40, base_delay_ms=30))
    records = Channel(config, seed=8).process(noise(20.0, seed=1)).packets
    delivered = [r for r in records if not r.lost]
    arrivals = np.array([r.index * 20 + r.delay_ms for r in delivered])
    assert np.all(np.diff(arrivals) >= 0)
    assert min(r.delay_ms for r in delivered) >= 30
    assert all(r.delay_ms is None for r in records if r.lost)


@pytest.mark.parametrize("distribution", ["uniform", "exponential"])
def test_jitter_has_the_stated_mean(distribution: str) -> None:
    """jitter_ms = 2 on 20 ms packets: a packet almost never waits for its predecessor
    (exponential: P(X > 20 ms) = e^-10), so the mean extra delay estimates jitter_ms. Over
    ~10,000 packets its standard error is 2/sqrt(10^4) = 0.02 ms (exponential) or less; the
    tolerance 0.1 ms is 5 standard errors."""
    config = LineConfig(jitter=JitterConfig(jitter_ms=2, distribution=distribution,
                                            base_delay_ms=5), packet_ms=20)
    records = Channel(config, seed=12).process(noise(200.0, seed=2, level=0)).packets
    extra = np.array([r.delay_ms for r in records]) - 5
    np.testing.assert_allclose(extra.mean(), 2.0, atol=0.1)
    assert extra.min() >= 0
    if distribution == "uniform":
        assert extra.max() <= 4.0
    else:
        np.testing.assert_allclose(extra.std(), 2.0, atol=0.1)  # exponential: sd == mean


# --- concealment -----------------------------------------------------------------------------

def packet_rows(audio: PcmAudio) -> np.ndarray:
    return audio.samples[: audio.num_samples // 480 * 480].reshape(-1, 480).astype(np.float64)


def test_silence_concealment_plays_zeros_for_lost_packets() -> None:
    speech = noise(10.0, seed=3)
    result = Channel(LineConfig(loss=IndependentLoss(rate=0.3)), seed=6).process(speech)
    played, sent = packet_rows(result.audio), packet_rows(speech)
    lost = np.array([p.lost for p in result.packets])
    assert lost.any() and not any(p.concealed for p in result.packets)
    assert np.all(played[lost] == 0)
    np.testing.assert_array_equal(played[~lost], sent[~lost])


def test_repeat_concealment_fades_the_last_good_packet_then_falls_silent() -> None:
    """Every lost packet of a long random run is checked against the policy: the k-th
    consecutive loss plays the last packet received with a gain falling linearly from
    1 - (k-1)/R to 1 - k/R across the packet (R = max_repeats = 3); losses past R are silent.
    Tolerance 0.5: the delivered audio is rounded to int16."""
    speech = noise(30.0, seed=4)
    config = LineConfig(loss=IndependentLoss(rate=0.4),
                        concealment=ConcealmentConfig(policy="repeat", max_repeats=3))
    result = Channel(config, seed=7).process(speech)
    played, sent = packet_rows(result.audio), packet_rows(speech)
    ramp = np.arange(1, 481) / 480
    last_good, run, seen_runs = None, 0, set()
    for record, row in zip(result.packets, played, strict=False):
        index = record.index
        if not record.lost:
            np.testing.assert_array_equal(row, sent[index])
            last_good, run = sent[index], 0
            continue
        run += 1
        seen_runs.add(run)
        if last_good is None or run > 3:
            assert not record.concealed
            assert np.all(row == 0)
        else:
            assert record.concealed
            np.testing.assert_allclose(row, last_good * (1 - (run - 1 + ramp) / 3), atol=0.5)
    assert {1, 2, 3, 4} <= seen_runs  # every branch was exercised


# --- codecs ----------------------------------------------------------------------------------

def level_db(audio: PcmAudio, reference: PcmAudio) -> float:
    """Level of ``audio`` relative to ``reference``, over the middle (away from the edges)."""
    edge = RATE_HZ // 5
    a = audio.samples[edge:-edge].astype(np.float64)
    b = reference.samples[edge:-edge].astype(np.float64)
    return 20 * np.log10(max(np.sqrt(np.mean(a ** 2)), 1e-9) / np.sqrt(np.mean(b ** 2)))


@pytest.mark.parametrize("codec", ["mulaw", "alaw"])
def test_g711_band_limits_like_a_phone_line(codec: str) -> None:
    """300-3400 Hz: 1 kHz passes within 1 dB, 6 kHz (above 8 kHz's Nyquist) is cut by at least
    30 dB, 100 Hz (below the band) by at least 20 dB."""
    def through(frequency_hz: float) -> float:
        signal = tone(frequency_hz)
        return level_db(Channel(LineConfig(codec=codec), seed=1).process(signal).audio, signal)

    assert abs(through(1000.0)) <= 1.0
    assert through(6000.0) <= -30.0
    assert through(100.0) <= -20.0


@pytest.mark.parametrize("codec", ["mulaw", "alaw"])
def test_g711_output_is_aligned_with_its_input(codec: str) -> None:
    """Channel.process removes the codec's fixed latency: a click comes back where it was."""
    click = np.zeros(4800, dtype=np.int16)
    click[2400] = 20_000
    out = Channel(LineConfig(codec=codec), seed=1).process(PcmAudio(click)).audio
    assert out.num_samples == 4800
    assert int(np.argmax(np.abs(out.samples))) == 2400


@pytest.mark.parametrize("codec", ["pcm", "mulaw", "opus"])
def test_stream_and_turn_forms_agree_chunk_for_chunk(codec: str) -> None:
    """Pushing 20 ms chunks (or odd-sized ones, some completing no packet) to a ChannelStream
    gives the same packets and the same audio as Channel.process, shifted by the codec's
    latency."""
    if codec == "opus":
        pytest.importorskip("opuslib_next", reason="the opus binding is not installed")
    config = LineConfig(codec=codec, loss=GilbertElliottLoss(p=0.05, r=0.3),
                        jitter=JitterConfig(jitter_ms=10),
                        concealment=ConcealmentConfig(policy="repeat"))
    speech = tone_speech(SENTENCE, seed=5)
    turn = Channel(config, seed=3).process(speech, turn_id=1)
    for chunk_samples in (480, 331, 97):
        stream = ChannelStream(config, seed=3)
        delivered = []
        for start in range(0, speech.num_samples, chunk_samples):
            chunk = PcmAudio(speech.samples[start:start + chunk_samples])
            delivered += stream.push(chunk, turn_id=1)
        delivered += stream.flush(turn_id=1)
        assert all(packet.audio.duration_seconds == 0.02 for packet in delivered)
        assert tuple(packet.record for packet in delivered) == turn.packets
        audio = np.concatenate([packet.audio.samples for packet in delivered])
        latency = stream.latency_samples
        np.testing.assert_array_equal(audio[latency:latency + speech.num_samples],
                                      turn.audio.samples)


def test_the_channel_takes_canonical_audio_only() -> None:
    with pytest.raises(ValueError, match="24000 Hz"):
        Channel(seed=1).process(PcmAudio(np.zeros(160, dtype=np.int16), 8000))
    with pytest.raises(ValueError, match="direction"):
        Channel(seed=1, direction="sideways")  # type: ignore[arg-type]
    empty = Channel(LineConfig(codec="alaw"), seed=1).process(PcmAudio.silence(0.0))
    assert empty.audio.num_samples == 0 and empty.stats.packets_sent == 0


def test_a_missing_opus_binding_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opuslib_next", None)  # makes `import opuslib_next` fail
    with pytest.raises(MissingDependencyError) as caught:
        Channel(LineConfig(codec="opus"), seed=1)
    assert str(caught.value) == ("The opus channel codec needs the 'opuslib-next-bundled' "
                                 "package: pip install 'voicelab[telephony]'")


@pytest.mark.parametrize("opus", [OpusConfig(), OpusConfig(sample_rate_hz=48_000),
                                  OpusConfig(bitrate_bps=12_000)],
                         ids=["24k", "48k", "12kbps"])
@pytest.mark.parametrize("packet_ms", [20, 30])
def test_opus_round_trip_keeps_speech(opus: OpusConfig, packet_ms: int) -> None:
    """Tone speech through libopus without loss: the level stays within 2 dB and the output
    correlates with the input (observed 0.75-0.85 at 12-24 kbps; asserted > 0.6, which
    silence, a wrong alignment or noise would all fail). 30 ms packets carry three 10 ms
    frames."""
    pytest.importorskip("opuslib_next", reason="the opus binding is not installed")
    speech = tone_speech(SENTENCE, seed=9)
    channel = Channel(LineConfig(codec="opus", opus=opus, packet_ms=packet_ms), seed=1)
    out = channel.process(speech).audio
    assert out.num_samples == speech.num_samples
    assert abs(level_db(out, speech)) <= 2.0
    correlation = np.corrcoef(out.samples.astype(np.float64),
                              speech.samples.astype(np.float64))[0, 1]
    assert correlation > 0.6


def test_opus_under_loss_is_concealed_and_reproducible() -> None:
    pytest.importorskip("opuslib_next", reason="the opus binding is not installed")
    config = LineConfig(codec="opus", loss=IndependentLoss(rate=0.2),
                        concealment=ConcealmentConfig(policy="repeat", max_repeats=2))
    speech = tone_speech(SENTENCE, seed=9)
    first = Channel(config, seed=5).process(speech)
    again = Channel(config, seed=5).process(speech)
    assert first.audio.to_bytes() == again.audio.to_bytes()
    assert first.stats.packets_dropped > 0 and first.stats.packets_concealed > 0
