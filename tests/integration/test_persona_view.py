"""The persona's view of a response in a real call: its audio is the response's received
audio, byte for byte (joined from the recording when the persona reads it)."""

from __future__ import annotations

from pathlib import Path

import voicelab
from voicelab.execution._scorer import Scorer
from voicelab.personas._scripted import ScriptedPersona
from voicelab.recording import EventType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def test_a_persona_reading_the_response_audio_gets_what_was_received(tmp_path, monkeypatch):
    heard, calls = [], []
    real_reply, real_score = ScriptedPersona.reply, Scorer.score

    async def reply(self, response):
        heard.append((response.index, response.audio))
        return await real_reply(self, response)

    async def score(self, call):
        calls.append(call)
        return await real_score(self, call)

    monkeypatch.setattr(ScriptedPersona, "reply", reply)
    monkeypatch.setattr(Scorer, "score", score)
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path))
    assert outcome.exit_code == 0 and heard
    recording = calls[0].recording
    for index, audio in heard:
        received = recording.turn_audio(EventType.PRODUCT_AUDIO, f"turn-{index:03d}")
        assert received and audio.to_bytes() == received
