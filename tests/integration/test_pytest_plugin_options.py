"""The voicelab_run fixture takes a RunOptions; its keyword form still runs, and warns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# the starter suite's latency verdict is left out: on a busy machine it may be undecided
NO_TIMING = "scenario.eval_spec.max_first_audio_latency_ms=null"


def _installed_entry_point() -> bool:
    from importlib.metadata import entry_points

    return any(point.value == "voicelab.pytest_plugin"
               for point in entry_points(group="pytest11"))


def test_the_fixture_takes_options_and_warns_for_keywords(pytester: pytest.Pytester):
    subprocess.run([sys.executable, "-m", "voicelab", "init", str(pytester.path / "suite")],
                   check=True, capture_output=True, timeout=120)
    pytester.makepyfile(test_agent=f"""
        import pytest
        from voicelab import RunOptions

        def test_options(voicelab_run):
            outcome = voicelab_run("suite/run.yaml", RunOptions(trials=1,
                                                                overrides=["{NO_TIMING}"]))
            assert outcome.report.trial_count == 1
            assert outcome.bundle_path.parent.name == "bundles"  # --voicelab-artifacts-dir

        def test_keywords(voicelab_run):
            with pytest.warns(DeprecationWarning,
                              match=r"voicelab_run\\(run_file, voicelab.RunOptions\\("):
                outcome = voicelab_run("suite/run.yaml", 1, overrides=["{NO_TIMING}"])
            assert outcome.report.trial_count == 1

        def test_both(voicelab_run):
            with pytest.raises(TypeError, match="not both"):
                voicelab_run("suite/run.yaml", RunOptions(trials=1), label="which")
    """)
    plugin = () if _installed_entry_point() else ("-p", "voicelab.pytest_plugin")
    result = pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider",
                                           "-W", "error::DeprecationWarning:test_agent",
                                           "--voicelab-artifacts-dir", "bundles", timeout=240)
    result.assert_outcomes(passed=3)
    assert Path(pytester.path / "bundles" / "latest").is_symlink()
