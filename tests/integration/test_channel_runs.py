"""A telephony line in a run (an environment's ``channel:``): what the product receives is the
user's audio through the line, what the user hears is the product's through the other one, and
each turn's packets are counted in the bundle."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import voicelab
from voicelab.artifacts import read_json, read_voice_events
from voicelab.audio import Channel, PcmAudio, read_audio
from voicelab.config import LineConfig, load_run
from voicelab.errors import ConfigError
from voicelab.recording import EventType
from voicelab.runner._rescore_trial import read_recording

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SHORT = ["endpoint.settings.opening_text=Hello, your daily plan please?",
         "endpoint.settings.reply_text=Your daily plan is recorded and the reminder saved."]
TO_PRODUCT = {"codec": "mulaw", "packet_ms": 20,
              "loss": {"model": "gilbert_elliott", "p": 0.05, "r": 0.4},
              "concealment": {"policy": "repeat", "max_repeats": 2}}
TO_USER = {"codec": "alaw", "packet_ms": 30, "loss": {"model": "independent", "rate": 0.2}}


def environment(tmp_path: Path, channel: dict | None, name: str = "phone") -> Path:
    path = tmp_path / f"env-{name}.yaml"
    document = {"name": name, "impact": 0.0}
    if channel is not None:
        document["channel"] = channel
    path.write_text(yaml.safe_dump(document))
    return path


def run(tmp_path: Path, env: Path, *overrides: str, trials: int = 1):
    return voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=tmp_path / "runs",
        overrides=[*SHORT, f"environment_path={env}", *overrides]))


def trial_dir(outcome, index: int = 1) -> Path:
    return outcome.bundle_path / f"trial-{index:03d}"


def metrics(folder: Path) -> dict:
    return read_json(folder / "voice-metrics.json")


def user_turns(folder: Path) -> dict[str, np.ndarray]:
    recording = read_recording(folder)
    turns = sorted({e.turn_id for e in recording.of_type(EventType.USER_AUDIO) if e.turn_id})
    return {turn: np.frombuffer(recording.turn_audio(EventType.USER_AUDIO, turn), "<i2")
            for turn in turns}


def test_the_product_receives_the_users_turns_through_the_line(tmp_path):
    clean = run(tmp_path / "clean", environment(tmp_path, None, "quiet"))
    lossy = run(tmp_path / "lossy", environment(tmp_path, {"to_product": TO_PRODUCT}))
    assert clean.exit_code == 0 and lossy.exit_code == 0
    sent, received = user_turns(trial_dir(clean)), user_turns(trial_dir(lossy))
    assert list(sent) == list(received) == ["turn-001"]
    seed = read_json(trial_dir(lossy) / "trial-report.json")["seed"]
    # the same line, by hand: the run sent exactly the line's output, turn after turn
    line = Channel(LineConfig.model_validate(TO_PRODUCT), seed=seed, direction="to_product")
    expected = {turn: line.process(PcmAudio(audio), turn_id=turn) for turn, audio in sent.items()}
    for turn, result in expected.items():
        assert np.array_equal(received[turn], result.audio.samples)
        assert not np.array_equal(received[turn], sent[turn])  # coded: not the input
    metrics = read_json(trial_dir(lossy) / "voice-metrics.json")
    reply = metrics["turns"][1]
    stats = expected["turn-001"].stats
    assert reply["to_product_packets_sent"] == stats.packets_sent > 0
    assert reply["to_product_packets_dropped"] == stats.packets_dropped
    # the recorded rate is rounded to 6 decimals (runner/_channel.py)
    assert reply["to_product_loss_rate"] == pytest.approx(stats.effective_loss_rate, abs=1e-6)
    assert reply["channel"]["to_product"]["packets_concealed"] == stats.packets_concealed
    assert reply["to_user_packets_sent"] is None  # a clean line back: nothing to count
    assert metrics["channel"]["to_product"]["codec"] == "mulaw"
    assert metrics["channel"]["to_product"]["configured_loss_rate"] == pytest.approx(
        0.05 / 0.45)
    assert not (trial_dir(lossy) / "user-heard.wav").exists()


def test_lines_are_reproducible_from_the_seed_and_differ_between_seeds(tmp_path):
    env = environment(tmp_path, {"to_product": TO_PRODUCT, "to_user": TO_USER})
    first = run(tmp_path / "a", env, trials=2)
    again = run(tmp_path / "b", env, trials=2)
    for index in (1, 2):
        assert (trial_dir(first, index) / "user-sent.wav").read_bytes() == \
            (trial_dir(again, index) / "user-sent.wav").read_bytes()
        # what the user hears goes by the product's arrival times (as the listener's placement
        # does), which no seed fixes; the packets the product's turns lost are the seed's
        assert [metrics(trial_dir(first, index))["channel"]["to_product"]] == \
            [metrics(trial_dir(again, index))["channel"]["to_product"]]
    one, two = (metrics(trial_dir(first, i))["channel"]["to_product"] for i in (1, 2))
    assert one != two  # trial 2 has its own seed, so its own losses


def test_the_user_hears_the_product_through_its_own_line(tmp_path):
    env = environment(tmp_path, {"to_user": {"codec": "mulaw"}})
    outcome = run(tmp_path, env)
    assert outcome.exit_code == 0
    folder = trial_dir(outcome)
    heard = read_audio(folder / "user-heard.wav")
    placed = read_audio(folder / "product.wav")  # the product on the listener timeline
    # exactly the listener timeline through the line (the codec's delay taken out), and as
    # long or longer (the line runs on until the call ends)
    seed = read_json(folder / "trial-report.json")["seed"]
    expected = Channel(LineConfig(codec="mulaw"), seed=seed, direction="to_user").process(placed)
    assert heard.num_samples >= placed.num_samples
    assert np.array_equal(heard.samples[:placed.num_samples], expected.audio.samples)
    assert not np.array_equal(heard.samples[:placed.num_samples], placed.samples)
    metrics = read_json(folder / "voice-metrics.json")
    for turn in metrics["turns"]:
        assert turn["to_user_packets_sent"] > 0 and turn["to_user_packets_dropped"] == 0
        assert turn["to_product_packets_sent"] is None
    events = read_voice_events(folder / "voice-events.jsonl")
    (packets,) = [e for e in events if e["event_type"] == "channel.packets"]
    assert packets["attributes"]["line"] == "to_user"
    total = packets["attributes"]["total"]
    # every packet of the call is counted: the turns' and the silence between them
    assert total["packets_sent"] == sum(t["packets_sent"] for t in packets["attributes"]["turns"])
    assert total["packets_sent"] * 20 * 24 >= placed.num_samples


def test_late_packets_to_the_user_are_concealed_like_lost_ones(tmp_path):
    env = environment(tmp_path, {"to_user": {"codec": "pcm", "jitter": {"jitter_ms": 80}}})
    outcome = run(tmp_path, env, "listener.jitter_buffer_ms=40")
    metrics = read_json(trial_dir(outcome) / "voice-metrics.json")
    total = metrics["channel"]["to_user"]["total"]
    assert total["packets_dropped"] == 0 and total["packets_late"] > 0
    assert total["effective_loss_rate"] == pytest.approx(
        total["packets_late"] / total["packets_sent"], abs=1e-6)


def test_jitter_delays_each_packet_to_the_product(tmp_path):
    line = {"codec": "pcm", "packet_ms": 20, "jitter": {"jitter_ms": 30, "base_delay_ms": 40}}
    outcome = run(tmp_path, environment(tmp_path, {"to_product": line}), "pace_audio=true")
    assert outcome.exit_code == 0
    folder = trial_dir(outcome)
    events = read_voice_events(folder / "voice-events.jsonl")
    started = next(e for e in events if e["event_type"] == "user.turn_started")
    chunks = [e for e in events if e["event_type"] == "user.audio_chunk"]
    seed = read_json(folder / "trial-report.json")["seed"]
    expected = Channel(LineConfig.model_validate(line), seed=seed).process(
        PcmAudio(user_turns(folder)["turn-001"]), turn_id="turn-001")
    arrival = 0.0
    for index, chunk in enumerate(chunks):
        record = expected.packets[index]
        arrival = max(arrival, index * 20 + record.delay_ms)
        # a packet is never sent before its slot plus its delay (a lower bound: no timing
        # assertion a busy machine could break)
        assert chunk["monotonic_offset_ns"] - started["monotonic_offset_ns"] >= arrival * 1e6
    assert arrival >= 40  # the base delay at least


def test_listening_over_a_phone_line(tmp_path):
    env = environment(tmp_path, {"to_product": TO_PRODUCT, "to_user": {"codec": "mulaw"}})
    outcome = run(tmp_path, env, "pace_audio=true", "endpoint.settings.turn_detection=server_vad")
    folder = trial_dir(outcome)
    report = read_json(folder / "trial-report.json")
    assert outcome.exit_code == 0, report["failures"]
    metrics = read_json(folder / "voice-metrics.json")
    reply = metrics["turns"][1]
    assert reply["reference"] == "speech_end" and 400 <= reply["response_latency_ms"] <= 2500
    assert reply["to_product_packets_sent"] > 0 and reply["to_user_packets_sent"] > 0
    events = read_voice_events(folder / "voice-events.jsonl")
    line = [e for e in events if e["event_type"] == "user.audio_chunk"]
    # the line is cut into the channel's packets: 20 ms each
    assert {e["pcm"]["byte_count"] for e in line} == {20 * 24 * 2}
    lost = [e for e in line if e["attributes"].get("lost")]
    assert len(lost) == metrics["channel"]["to_product"]["total"]["packets_dropped"]
    assert (folder / "user-heard.wav").is_file()


def test_rescoring_a_trial_with_a_line_gives_the_same_metrics(tmp_path):
    env = environment(tmp_path, {"to_product": TO_PRODUCT, "to_user": TO_USER})
    outcome = run(tmp_path, env)
    folder = trial_dir(outcome)
    before = (folder / "voice-metrics.json").read_bytes()
    rescored = voicelab.rescore(outcome.bundle_path, output=tmp_path / "rescored")
    assert (rescored.path / "trial-001" / "voice-metrics.json").read_bytes() == before


def test_an_opus_line_without_its_package_is_a_configuration_error(tmp_path, monkeypatch):
    env = environment(tmp_path, {"to_user": {"codec": "opus"}})
    monkeypatch.setitem(sys.modules, "opuslib_next", None)
    loaded = load_run(EXAMPLE, overrides=[f"environment_path={env}"])
    from voicelab._validate import validate_run

    with pytest.raises(ConfigError) as raised:
        validate_run(loaded)
    assert raised.value.key == "channel.to_user.codec"
    assert "pip install 'voicelab[telephony]'" in raised.value.message
    assert str(env) in str(raised.value.source)
