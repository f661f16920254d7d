"""A resumed run applies the --set overrides its bundle kept; nothing that chooses code, a
process, a destination or a secret is taken from a bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

import voicelab
from voicelab.errors import ConfigError
from voicelab.execution._resume_overrides import resumed_overrides

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "run-workload-neutral-voice.yaml"


def test_the_recorded_overrides_come_back_and_a_repeated_one_is_fine():
    recorded = ["endpoint.settings.reply_latency_ms=700", "scenario.eval_spec.limits.max_turns=2"]
    assert resumed_overrides(recorded, [], bundle="b") == recorded
    assert resumed_overrides(recorded, ["endpoint.settings.reply_latency_ms=700"],
                             bundle="b") == recorded
    # the same key, spelled as the error messages print it, is the same key
    assert resumed_overrides(["script.turns.0.response=hi"], ["script.turns[0].response=hi"],
                             bundle="b") == ["script.turns[0].response=hi"]
    # a new key is passed on (the suite hash check decides whether it changes anything)
    assert resumed_overrides(recorded, ["trial_seed=42"], bundle="b") == [*recorded,
                                                                         "trial_seed=42"]


def test_a_conflicting_override_is_refused():
    with pytest.raises(ConfigError) as caught:
        resumed_overrides(["endpoint.settings.reply_latency_ms=700"],
                          ["endpoint.settings.reply_latency_ms=0"], bundle="b")
    assert caught.value.one_line() == (
        "--set endpoint.settings.reply_latency_ms=0: conflicts with the run's --set "
        "endpoint.settings.reply_latency_ms=700 (kept in the bundle): a resumed run keeps its "
        "configuration")


@pytest.mark.parametrize(("recorded", "why"), [
    ("endpoint.launch.command=[sh, -c, evil]", "code, a process or a destination"),
    ("endpoint.adapter=evil.Adapter", "code, a process or a destination"),
    ("endpoint={adapter: fake}", "code, a process or a destination"),
    ("outcome_probe.class=evil.Probe", "code, a process or a destination"),
    ("providers.openai.base_url=x", "code, a process or a destination"),
    ("endpoint.settings.uri=wss://elsewhere.example/ws", "a URL is never taken"),
    ("persona.notes=see https://x.example", "a URL is never taken"),
    ("endpoint.settings.api_key=***", "a secret the bundle does not keep"),
])
def test_what_a_bundle_must_not_choose_must_be_given_again(recorded, why):
    with pytest.raises(ConfigError) as caught:
        resumed_overrides([recorded], [], bundle="runs/x")
    message = caught.value.one_line()
    assert message.startswith(f"runs/x: overrides: the run was started with --set {recorded}; ")
    assert why in message and message.endswith("give it again with --set")
    key = recorded.partition("=")[0]
    given = f"{key}=given-again"
    assert resumed_overrides([recorded], [given], bundle="runs/x") == [given]


def test_a_run_records_its_overrides_with_secrets_masked(monkeypatch):
    monkeypatch.setenv("VOICELAB_TEST_TOKEN", "tok-4711-secret")
    loaded = voicelab.load_run(EXAMPLE, overrides=[
        "endpoint.settings.reply_latency_ms=700",
        "endpoint.settings.api_key=k",  # a secret name: masked even when too short to scrub
        'endpoint.settings.headers={X-Trace: "${VOICELAB_TEST_TOKEN}"}',
        "scenario.description=uses tok-4711-secret"])
    assert loaded.recorded_overrides() == [
        "endpoint.settings.reply_latency_ms=700", "endpoint.settings.api_key=***",
        'endpoint.settings.headers={X-Trace: "${VOICELAB_TEST_TOKEN}"}',
        "scenario.description=uses ***"]


def test_a_recorded_override_that_is_no_override_is_named_as_the_bundle_s():
    with pytest.raises(ConfigError, match=r"^runs/x: overrides: a recorded --set override is "
                                          r"not valid \(expected KEY=VALUE\)"):
        resumed_overrides(["no equals sign"], [], bundle="runs/x")
