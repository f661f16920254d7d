"""voicelab from pytest: a fixture that runs a suite, and run files collected as tests.

Installed with the package (entry point ``pytest11``), so nothing is needed to enable it.

The fixture::

    def test_booking(voicelab_run):
        outcome = voicelab_run("suite/run.yaml", voicelab.RunOptions(trials=5))  # a RunOutcome
        assert outcome.report.pass_rate.estimate == 1.0

fails the test when the run does not pass (exit code not 0: a trial failed, failed to execute,
or a gate of the run config blocked), naming each failed trial's failed verdicts, a transcript
excerpt and its bundle; ``check=False`` returns the outcome whatever it is. A configuration
error fails the test with its one-line message.

Collected run files: list them (relative to the rootdir) in the ini option
``voicelab_run_files``: a file, a glob (``suite/*.yaml``; ``**/`` is any depth, none included)
or a folder (``suite/``). A glob or folder collects the run files it meets (YAML naming a
``scenario_path``) and passes over the scenario, persona, script and suite files beside them; a
file named outright is always collected. Each trial of each is a test item
(``suite/run.yaml::trial-001``). The
trials of a file run together, once, when its first item runs (with ``pytest-xdist`` keep a
file on one worker: ``--dist loadfile``).

Options: ``--voicelab-trials N`` (every collected file's trial count), ``--voicelab-artifacts-dir
DIR`` (where bundles go; default: each run config's ``artifacts_dir``). voicelab's own modules
are imported when a fixture or item first runs, not when pytest starts.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .artifacts import TRANSCRIPT_MD, trial_folder

if TYPE_CHECKING:
    from .execution import RunOptions
    from .runner import RunOutcome, TrialResult

#: Lines of a failed trial's transcript shown in the failure.
TRANSCRIPT_LINES = 12


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("voicelab", "voicelab: voice agent simulation runs")
    group.addoption("--voicelab-trials", type=int, default=None, metavar="N",
                    help="trials of every run file collected by voicelab (default: each "
                         "config's trials)")
    group.addoption("--voicelab-artifacts-dir", default=None, metavar="DIR",
                    help="where voicelab bundles go (default: each run config's artifacts_dir)")
    parser.addini("voicelab_run_files", type="linelist", default=[],
                  help="voicelab run files (files, globs such as suite/*.yaml, or folders; "
                       "relative to the rootdir) whose trials are collected as test items; "
                       "a glob passes over the YAML files that are not run files")


# --- failure text -----------------------------------------------------------------------------

def _transcript_excerpt(trial_dir: Path) -> list[str]:
    path = trial_dir / TRANSCRIPT_MD
    if not path.is_file():
        return ["(no transcript.md)"]
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip() and not line.startswith("# ")]
    more = len(lines) - TRANSCRIPT_LINES
    return lines[:TRANSCRIPT_LINES] + ([f"... ({more} more lines)"] if more > 0 else [])


def trial_failure(result: TrialResult, bundle: Path) -> str:
    """Why one trial (a ``voicelab.runner.TrialResult``) did not pass: its execution failures,
    failed verdicts (with why) and judges, a transcript excerpt and its bundle folder."""
    report = result.report
    trial_dir = bundle / report.trial_id
    lines = [f"{report.trial_id} seed {report.seed} did not pass (exit {report.exit_reason})"]
    for failure in report.failures:
        lines.append(f"  execution failed: {failure.kind}: {failure.message}")
    failed = [v for v in report.verdicts if v.status in ("failed", "inconclusive")]
    if failed:
        lines.append("  failed verdicts:")
        for verdict in sorted(failed, key=lambda v: not v.critical):
            advisory = "" if verdict.critical else " (advisory)"
            lines.append(f"    - {verdict.name}{advisory}: {verdict.why or 'failed'}")
    for judge in report.judges:
        if not judge.passed:
            lines.append(f"  judge {judge.name}: {judge.status}")
    lines.append("  transcript:")
    lines.extend(f"    {line}" for line in _transcript_excerpt(trial_dir))
    lines.append(f"  bundle: {trial_dir}")
    return "\n".join(lines)


def run_failure(outcome: RunOutcome) -> str:
    """Why a run (a ``voicelab.runner.RunOutcome``) did not pass: every failed trial, every
    blocking gate, the run's bundle."""
    report = outcome.report
    parts = [f"voicelab run {report.run_id}: {report.passed_trials}/{report.trial_count} "
             f"trial(s) passed, exit code {outcome.exit_code}"]
    parts += [trial_failure(trial, outcome.bundle_path) for trial in outcome.trials
              if not trial.report.passed]
    parts += [f"gate {gate.status}: {gate.message}" for gate in report.gates
              if gate.status != "passed"]
    parts += [f"could not write: {problem}" for problem in outcome.write_errors]
    parts.append(f"bundle: {outcome.location}")
    return "\n".join(parts)


# --- the fixture ------------------------------------------------------------------------------

def _run(run_file: str | Path, options: RunOptions) -> RunOutcome:
    import voicelab
    from voicelab.errors import ConfigError

    try:
        return voicelab.run(run_file, options)
    except ConfigError as error:
        pytest.fail(f"voicelab: {error.one_line()}", pytrace=False)


def _fixture_options(options: RunOptions | int | None, keywords: dict[str, Any]
                     ) -> RunOptions:
    """The fixture's options in either form: a ``RunOptions``, or (deprecated, warned at the
    test's line) the keywords and positional trial count it took before."""
    from voicelab import RunOptions

    if isinstance(options, int) and not isinstance(options, bool):
        keywords, options = {"trials": options, **keywords}, None
    if options is not None and not isinstance(options, RunOptions):
        raise TypeError(f"voicelab_run() takes a voicelab.RunOptions, got {options!r}")
    if not keywords:
        return options if options is not None else RunOptions()
    if options is not None:
        raise TypeError("voicelab_run() takes a RunOptions or keywords, not both")
    names = ", ".join(f"{name}=..." for name in keywords)
    warnings.warn(f"voicelab_run(run_file, {names}) is deprecated: use "
                  f"voicelab_run(run_file, voicelab.RunOptions({names}))",
                  DeprecationWarning, stacklevel=3)
    return RunOptions(**keywords)


@pytest.fixture
def voicelab_run(request: pytest.FixtureRequest) -> Callable[..., RunOutcome]:
    """``voicelab_run(run_file, options=None, *, check=True)``: run a suite (``options`` a
    ``voicelab.RunOptions``, as for ``voicelab.run``; its ``artifacts_dir`` defaults to
    ``--voicelab-artifacts-dir``) and return its ``RunOutcome``; with ``check`` the test fails
    when the run did not pass. The keyword form (``trials=5``) still works and warns."""
    default_dir = request.config.getoption("voicelab_artifacts_dir")

    def run(run_file: str | Path, options: RunOptions | int | None = None, *,
            check: bool = True, **keywords: Any) -> RunOutcome:
        chosen = _fixture_options(options, keywords)
        if chosen.artifacts_dir is None and default_dir is not None:
            chosen = dataclasses.replace(chosen, artifacts_dir=default_dir)
        outcome = _run(run_file, chosen)
        if check and outcome.exit_code != 0:
            pytest.fail(run_failure(outcome), pytrace=False)
        return outcome

    return run


# --- collected run files ----------------------------------------------------------------------

def _glob_pattern(glob: str) -> re.Pattern[str]:
    """A path glob as a shell reads it: ``*`` and ``?`` stay within one folder, ``**/`` is any
    number of folders (none included), ``[...]`` a set of characters."""
    parts, index = [], 0
    while index < len(glob):
        if glob.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif glob.startswith("**", index):
            parts.append(".*")
            index += 2
        elif glob[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            parts.append("[^/]")
            index += 1
        elif glob[index] == "[" and "]" in glob[index + 2:]:
            end = glob.index("]", index + 2)
            body = glob[index + 1:end]
            parts.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            index = end + 1
        else:
            parts.append(re.escape(glob[index]))
            index += 1
    return re.compile("".join(parts) + r"\Z")


def _matches(relative: str, pattern: str) -> bool:
    """``relative`` (a POSIX path below the rootdir) matched by one ``voicelab_run_files`` entry
    as users write them: a glob (``suite/*.yaml``; ``suite/**/*.yaml`` at any depth, the folder
    itself included), or a folder (``suite/``: every file in it, at any depth)."""
    pattern = pattern.strip().removeprefix("./")
    if not pattern:
        return False
    if pattern.endswith("/") or not any(char in pattern for char in "*?[") and \
            not pattern.endswith((".yaml", ".yml")):
        return relative.startswith(pattern.rstrip("/") + "/")
    return _glob_pattern(pattern).match(relative) is not None


def _names_one_file(pattern: str) -> bool:
    return not any(char in pattern for char in "*?[") and \
        pattern.strip().endswith((".yaml", ".yml"))


def is_run_file(path: Path) -> bool:
    """A YAML file whose top level names a scenario (``scenario_path``): a run config, not the
    scenario, persona, data, script, environment or suite files that sit beside it."""
    from voicelab.config import read_yaml
    from voicelab.errors import ConfigError

    try:
        document = read_yaml(path)
    except ConfigError:
        return False
    return isinstance(document, dict) and "scenario_path" in document


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("voicelab_run_files")
    if not patterns or file_path.suffix not in (".yaml", ".yml"):
        return None
    root = parent.config.rootpath
    try:
        relative = file_path.relative_to(root).as_posix()
    except ValueError:
        return None
    matched = [pattern for pattern in patterns if _matches(relative, pattern)]
    if not matched:
        return None
    # a file named outright is collected whatever it holds (its error says what is wrong); a
    # glob over a suite's folder also meets the files a run file names: only run files count
    if not any(_names_one_file(pattern) for pattern in matched) and not is_run_file(file_path):
        return None
    return VoicelabFile.from_parent(parent, path=file_path)


class VoicelabTrialFailed(Exception):
    """A collected trial did not pass; the message is :func:`trial_failure`'s text."""


class VoicelabFile(pytest.File):
    """A run file: one item per planned trial; the run happens once, at the first item."""

    _outcome: RunOutcome | None = None

    def _trials(self) -> int:
        from voicelab.config import load_run
        from voicelab.errors import ConfigError

        given = self.config.getoption("voicelab_trials")
        if given is not None:
            return int(given)
        try:
            return load_run(self.path).run.trials
        except ConfigError as error:
            raise self.CollectError(f"voicelab: {error.one_line()}") from None

    def collect(self) -> Iterator[pytest.Item]:
        for index in range(1, self._trials() + 1):
            yield VoicelabTrial.from_parent(self, name=trial_folder(index), index=index)

    def outcome(self) -> RunOutcome:
        if self._outcome is None:
            from voicelab import RunOptions

            self._outcome = _run(self.path, RunOptions(
                trials=self.config.getoption("voicelab_trials"),
                artifacts_dir=self.config.getoption("voicelab_artifacts_dir")))
        return self._outcome


class VoicelabTrial(pytest.Item):
    """One trial of a collected run file."""

    def __init__(self, *, index: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.index = index

    def runtest(self) -> None:
        assert isinstance(self.parent, VoicelabFile)
        outcome = self.parent.outcome()
        result = next((t for t in outcome.trials if t.report.trial == self.index), None)
        if result is None:
            raise VoicelabTrialFailed(f"{self.name} did not run (the run ended early; bundle: "
                                      f"{outcome.location})")
        if result.report.status == "unjudged":  # nothing judged it: no pass, no failure
            pytest.skip(f"{self.name} unjudged: no critical verdict or judge applies "
                        f"(bundle: {outcome.bundle_path / self.name})")
        if not result.report.passed:
            raise VoicelabTrialFailed(trial_failure(result, outcome.bundle_path))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, VoicelabTrialFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"voicelab {self.name}"


__all__ = ["TRANSCRIPT_LINES", "VoicelabFile", "VoicelabTrial", "VoicelabTrialFailed",
           "is_run_file", "run_failure", "trial_failure", "voicelab_run"]
