"""The pytest plugin: the voicelab_run fixture and run files collected as tests, in a pytest
run of their own (pytester, a subprocess) on the starter suite against the fake product."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from voicelab.cli._init import init_suite

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
BROKEN = "endpoint.settings.claim_without_tool=true"  # the product says "saved" but saves nothing
# the starter suite's latency verdict is left out: on a busy machine it may be undecided, and
# how that is judged is tested elsewhere (tests/integration/test_degraded_runs.py)
NO_TIMING = "scenario.eval_spec.max_first_audio_latency_ms=null"


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    init_suite(pytester.path / "suite")
    return pytester.path / "suite"


def _installed_entry_point() -> bool:
    from importlib.metadata import entry_points

    return any(point.value == "voicelab.pytest_plugin"
               for point in entry_points(group="pytest11"))


def _pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # installed as the README says, the entry point loads the plugin; a checkout that is not
    # the installed one (no entry point) names it, as the entry point would
    plugin = () if _installed_entry_point() else ("-p", "voicelab.pytest_plugin")
    return pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", *args,
                                         timeout=240)


def test_the_entry_point_names_the_plugin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {
        "voicelab": "voicelab.pytest_plugin"}


def test_the_fixture_runs_a_suite_and_a_failure_says_why(pytester, suite):
    pytester.makepyfile(test_agent=f"""
        def test_passes(voicelab_run):
            outcome = voicelab_run("suite/run.yaml", trials=2, overrides=["{NO_TIMING}"])
            assert outcome.report.passed_trials == 2

        def test_regression_is_explained(voicelab_run):
            voicelab_run("suite/run.yaml", trials=2, overrides=["{BROKEN}", "{NO_TIMING}"])

        def test_check_false_returns_the_outcome(voicelab_run):
            outcome = voicelab_run("suite/run.yaml", trials=1, overrides=["{BROKEN}"],
                                   check=False)
            assert outcome.exit_code == 3

        def test_a_configuration_error_is_one_line(voicelab_run):
            voicelab_run("suite/run.yaml", trials=1, overrides=["scenario.nope=1"])
    """)
    result = _pytest(pytester, "--voicelab-artifacts-dir", "bundles")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "0/2 trial(s) passed, exit code 3" in out
    assert "trial-001 seed 1 did not pass (exit endpoint_completion)" in out
    assert "failed verdicts:" in out and "- outcome_reminder_created: persisted" in out
    assert "transcript:" in out and "**User** [turn-001]: Please record my daily plan" in out
    assert f"bundle: {pytester.path / 'bundles'}" in out
    assert "voicelab: --set scenario.nope=1" in out
    assert "Traceback" not in out


def test_collected_run_files_make_one_test_per_trial(pytester, suite):
    pytester.makeini("[pytest]\nvoicelab_run_files =\n    suite/run.yaml\n")
    collected = _pytest(pytester, "--collect-only", "-q", "--voicelab-trials", "2")
    collected.stdout.fnmatch_lines(["suite/run.yaml::trial-001", "suite/run.yaml::trial-002"])
    broken = suite / "run.yaml"
    broken.write_text(broken.read_text().replace("settings: {}",
                                                 "settings: {claim_without_tool: true}", 1))
    result = _pytest(pytester, "--voicelab-trials", "2", "--voicelab-artifacts-dir", "bundles",
                     "--junitxml", "junit.xml")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "trial-002 seed 2 did not pass" in out and "outcome_reminder_created" in out
    assert out.count("bundle: ") >= 2
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="trial-001"' in junit and "outcome_reminder_created" in junit


@pytest.mark.parametrize("glob", ["suite/*.yaml", "suite/**/*.yaml", "suite/"])
def test_the_glob_a_user_writes_collects_the_run_files_and_skips_the_rest(pytester, suite,
                                                                         glob):
    # the starter suite's folder also holds its scenario, persona, data, script, environment
    # and sweep files: they are not run files, and a glob over the folder must not fail on them
    (suite / "more").mkdir()
    (suite / "more" / "second-run.yaml").write_text((suite / "run.yaml").read_text().replace(
        "scenario_path: scenario.yaml", "scenario_path: ../scenario.yaml").replace(
        "persona_path: persona.yaml", "persona_path: ../persona.yaml").replace(
        "data_path: data.yaml", "data_path: ../data.yaml").replace(
        "script_path: script.yaml", "script_path: ../script.yaml").replace(
        "environment_path: environment.yaml", "environment_path: ../environment.yaml"))
    pytester.makeini(f"[pytest]\nvoicelab_run_files = {glob}\n")
    collected = _pytest(pytester, "--collect-only", "-q", "--voicelab-trials", "1")
    assert collected.ret == 0, collected.stdout.str()
    out = collected.stdout.str()
    items = {line for line in out.splitlines() if "::" in line}
    expected = {"suite/run.yaml::trial-001"}
    if glob != "suite/*.yaml":
        expected.add("suite/more/second-run.yaml::trial-001")
    assert items == expected, out
    assert "scenario.yaml" not in out and "suite.yaml" not in out and "error" not in out.lower()


def test_a_run_file_named_outright_that_is_broken_is_still_an_error(pytester, suite):
    (suite / "run.yaml").write_text("scenario_path: nowhere.yaml\npersona_path: persona.yaml\n")
    pytester.makeini("[pytest]\nvoicelab_run_files = suite/run.yaml\n")
    collected = _pytest(pytester, "--collect-only", "-q")
    assert collected.ret != 0
    assert "voicelab: " in collected.stdout.str() and "nowhere.yaml" in collected.stdout.str()
