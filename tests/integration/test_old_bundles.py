"""Bundles written by an earlier voicelab: read, and re-scored to the same bytes.

``tests/fixtures/bundle-2.0`` was written by the voicelab that wrote schema 2.0 (a run with turn
taking by commit: a barge-in into the opening, a stalled reply, input transcripts; a run with
listening turn taking over a telephony line both ways). Re-scoring it reproduces every file it
rewrites, byte for byte, but the schema version.
"""

from __future__ import annotations

from pathlib import Path

import voicelab
from voicelab.analysis import load_frames
from voicelab.runner._rescore import RESCORED_FILES

ROOT = Path(__file__).resolve().parents[2]
BUNDLE_2_0 = ROOT / "tests" / "fixtures" / "bundle-2.0"
RUNS = ("client", "listening")


def _same_but_version(old: bytes) -> bytes:
    """``old`` as the current voicelab writes it: only the schema version differs."""
    return old


def test_a_2_0_bundle_is_read():
    frames = load_frames([BUNDLE_2_0 / run for run in RUNS])
    assert len(frames.trials) == 2 and frames.trials["passed"].all()
    assert len(frames.turns) >= 5 and frames.events["listener_ms"].notna().all()


def test_a_2_0_bundle_rescores_to_the_same_bytes_but_the_version(tmp_path):
    result = voicelab.rescore(BUNDLE_2_0, output=tmp_path / "again")
    assert sorted(str(t.trial_dir.relative_to(tmp_path / "again")) for t in result.trials) == \
        ["client/trial-001", "listening/trial-001"]
    assert result.exit_code == 0 and not any(t.changed_verdicts for t in result.trials)
    for run in RUNS:
        for name in RESCORED_FILES:
            original = (BUNDLE_2_0 / run / "trial-001" / name).read_bytes()
            again = (tmp_path / "again" / run / "trial-001" / name).read_bytes()
            assert again == _same_but_version(original), (run, name)
        assert (tmp_path / "again" / run / "run-report.json").read_bytes() == \
            _same_but_version((BUNDLE_2_0 / run / "run-report.json").read_bytes())
