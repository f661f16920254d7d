"""Who names the session: the evaluator, in ``evaluator.init``'s ``request.session_id``, with the
trial's own id (not the configured one); docs/protocol.md says so once, and its wire section
agrees with its contract section."""

from __future__ import annotations

import re
from pathlib import Path

import voicelab
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
PROTOCOL = ROOT / "docs" / "protocol.md"


def test_the_product_is_given_the_trials_session_id(tmp_path: Path) -> None:
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(trials=1, artifacts_dir=tmp_path))
    trial = outcome.bundle_path / "trial-001"
    report = read_json(trial / "trial-report.json")
    raw = read_json(trial / "raw-endpoint-events.json")
    echoed = [event["raw"]["session_id"] for event in raw["events"]
              if isinstance(event.get("raw"), dict)
              and event["raw"].get("type") == "conversation.completed"]
    # the fake echoes the id it was sent in evaluator.init
    assert echoed == [report["session_id"]]
    assert report["session_id"] != report["configured_session_id"]
    assert report["session_id"].startswith(f"{report['configured_session_id']}-")


def test_protocol_md_says_once_who_sends_the_session_id() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    init_row = next(line for line in text.splitlines()
                    if line.startswith('| `{"type":"evaluator.init"'))
    assert "exactly as configured" not in init_row
    assert "the trial's session id" in init_row
    assert len(re.findall(r"\*\*Session ids\.\*\*", text)) == 1
