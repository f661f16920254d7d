"""JUnit XML for CI servers (GitHub Actions, GitLab, Jenkins) from run and sweep bundles.

One ``<testsuite>`` per cell (a plain run is one cell), one ``<testcase>`` per trial, named by
trial and seed so a CI's history follows the same trial across builds:

- a trial whose execution failed is an ``<error>`` (the execution failures, then any failed
  verdicts);
- a trial that ran but did not pass is a ``<failure>`` carrying each failed verdict's ``why``
  (critical first) and each failed critical judge; an inconclusive trial (nothing failed, a
  critical verdict undecided after its retries) is a ``<failure type="inconclusive">`` whose
  message says so and why (not judged is not passed);
- a trial that nothing judged (``unjudged``: an ingested call without a run file, or whose
  verdicts all need a simulation) is ``<skipped type="unjudged">``: neither a pass nor a
  failure, and its message names the verdicts that did not apply;
- planned trials that never ran (an interrupted run) are one ``<error>`` test case;
- a cell that ``--history`` found flaky (``flakiness.json`` beside the run or sweep report)
  says so the way CI servers read it: a ``flaky`` property (``true``) on its suite and on each
  of its test cases, with the cell's stability, pass rate over its runs and any flip since the
  last run as suite properties;
- ``compare`` gates are test cases of a ``compare`` suite: a gate that blocks is a failure, an
  inconclusive gate that does not block is ``<skipped>`` (not judged is not passed);
- a staged sweep (docs/cost.md) has one suite per stage instead of per cell: the trials of its
  cells, then a ``gate`` test case (a failure when the stage's gate failed); a stage that did
  not run is a suite whose ``gate`` case is ``<skipped>`` with the reason.

``labels`` (``compare``: baseline and candidate) prefix each run's suite names and test ids, so
two runs of the same cells stay two suites. Every test case's ``<system-out>`` names its trial
bundle. Reports are read from disk, so the
XML can be written for any finished or interrupted bundle, not only the one just run.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .._atomic import atomic_write
from ..errors import ConfigError
from ._members import BundleMemberError
from ._names import FLAKINESS, MATRIX_REPORT, RUN_REPORT, TRIAL_REPORT
from ._reader import read_json, read_trial_report_json

#: The suite that holds ``compare`` gates.
GATE_SUITE = "compare"
_MESSAGE_CHARS = 500
# characters XML 1.0 cannot carry at all (not even escaped): a transcript may hold them
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class GateOutcome(Protocol):
    """What a gate result needs for JUnit (``voicelab.scoring.GateResult`` has it; read-only,
    so a frozen dataclass matches)."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def blocks(self) -> bool: ...


@dataclass
class _Case:
    classname: str
    name: str
    seconds: float = 0.0
    outcome: str | None = None  # "failure", "error" or "skipped"
    kind: str = ""
    message: str = ""
    details: str = ""
    output: str = ""
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class _Suite:
    name: str
    timestamp: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    cases: list[_Case] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for case in self.cases if case.outcome == outcome)


# --- reading bundles --------------------------------------------------------------------------

def _natural(path: Path) -> tuple[int, str]:
    return (len(path.name), path.name)


def _cells(path: Path) -> list[tuple[str, Path]]:
    """(cell name, run dir) of a sweep directory or a run directory."""
    if (path / MATRIX_REPORT).is_file():
        matrix = read_json(path / MATRIX_REPORT)
        cells = matrix.get("cells") or []
        if not isinstance(cells, list) or not all(
                isinstance(cell, dict) and isinstance(cell.get("cell_id"), str)
                and isinstance(cell.get("bundle_path"), str) for cell in cells):
            raise ConfigError("must be a list of cells, each with a cell_id and a bundle_path",
                              source=path / MATRIX_REPORT, key="cells")
        return [(cell["cell_id"], path / Path(cell["bundle_path"]).name) for cell in cells]
    if (path / RUN_REPORT).is_file():
        report = read_json(path / RUN_REPORT)
        name = "__".join(str(report.get(k, "")) for k in ("scenario_id", "persona",
                                                          "environment"))
        return [(name, path)]
    raise ConfigError("not a run or sweep directory (no run-report.json or "
                      "matrix-report.json)", source=path)


def _timestamp(text: object) -> str | None:
    """JUnit's timestamp: ISO 8601 in UTC without a zone suffix, to the second."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_CHARS else line[:_MESSAGE_CHARS - 1] + "…"


def _verdict_lines(report: dict[str, Any]) -> list[str]:
    failed = [v for v in report.get("verdicts") or []
              if not v.get("passed") and v.get("status") != "not_applicable"]
    failed.sort(key=lambda v: not v.get("critical", True))  # critical first, order kept
    lines = [f"{v.get('name')}: {v.get('why') or 'failed'}"
             + ("" if v.get("critical", True) else " (advisory)") for v in failed]
    for judge in report.get("judges") or []:
        if judge.get("critical") and judge.get("status") != "passed":
            reason = judge.get("error") or judge.get("rationale") or judge.get("status")
            lines.append(f"judge {judge.get('name')}: {judge.get('status')}: {reason}")
    return lines


def _trial_case(cell: str, trial_dir: Path) -> _Case:
    report = read_trial_report_json(trial_dir / TRIAL_REPORT)
    case = _Case(classname=cell, name=f"{report.get('trial_id', trial_dir.name)} seed "
                 f"{report.get('seed')}", seconds=float(report.get("duration_seconds") or 0.0),
                 output=f"bundle: {trial_dir}")
    verdicts = _verdict_lines(report)
    if report.get("execution_status") != "succeeded":
        failures = [f"{f.get('kind')}: {f.get('message')}" for f in report.get("failures") or []]
        lines = failures or [f"execution {report.get('execution_status')} "
                             f"({report.get('exit_reason')})"]
        case.outcome, case.kind = "error", "execution"
        case.message, case.details = _one_line(lines[0]), "\n".join([*lines, *verdicts])
    elif report.get("status") == "inconclusive":  # not passed, but not a failed verdict
        attempts = int(report.get("attempt") or 1)
        lines = [f"inconclusive after {attempts} attempt(s): " + (verdicts[0] if verdicts
                 else "a critical verdict could not be decided"), *verdicts[1:]]
        case.outcome, case.kind = "failure", "inconclusive"
        case.message, case.details = _one_line(lines[0]), "\n".join(lines)
    elif report.get("status") == "unjudged":  # nothing applied: not a pass, not a failure
        skipped = [str(v.get("name")) for v in report.get("verdicts") or []
                   if v.get("status") == "not_applicable"]
        case.outcome, case.kind = "skipped", "unjudged"
        case.message = _one_line("unjudged: no critical verdict or judge applies" + (
            f" (not applicable: {', '.join(skipped)})" if skipped else ""))
    elif not report.get("passed"):
        lines = verdicts or [f"the trial did not pass ({report.get('exit_reason')})"]
        case.outcome, case.kind = "failure", "verdict"
        case.message, case.details = _one_line(lines[0]), "\n".join(lines)
    return case


def _stabilities(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The cells ``flakiness.json`` (written by ``--history``) classified, by cell; none when
    there is none (or it is not what it should be: the XML is written without marks)."""
    if not (path / FLAKINESS).is_file():
        return {}
    try:
        cells = read_json(path / FLAKINESS).get("cells")
    except (ConfigError, BundleMemberError):
        return {}
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for cell in cells if isinstance(cells, list) else []:
        key = tuple(cell.get(k) for k in ("scenario", "persona", "environment")) \
            if isinstance(cell, dict) else ()
        if len(key) == 3 and all(isinstance(part, str) for part in key):
            found[key] = cell  # type: ignore[index]
    return found


def _stability_properties(cell: dict[str, object]) -> dict[str, str]:
    rate = cell.get("pass_rate") if isinstance(cell.get("pass_rate"), dict) else {}
    properties = {"flaky": str(cell.get("stability") == "flaky").lower(),
                  "stability": str(cell.get("stability"))}
    if isinstance(rate, dict) and rate.get("estimate") is not None:
        properties["history_pass_rate"] = (f"{rate.get('estimate')} [{rate.get('low')}, "
                                           f"{rate.get('high')}] ({rate.get('passed')}/"
                                           f"{rate.get('n')})")
    if cell.get("flipped"):
        properties["flipped"] = str(cell.get("flipped"))
    return properties


def _run_suite(cell: str, run_dir: Path,
               stabilities: dict[tuple[str, str, str], dict[str, object]] | None = None) -> _Suite:
    report = read_json(run_dir / RUN_REPORT) if (run_dir / RUN_REPORT).is_file() \
        else {}
    suite = _Suite(cell, _timestamp(report.get("started_at")),
                   {k: str(report[k]) for k in ("run_id", "bundle_path", "suite_hash", "status")
                    if report.get(k) is not None})
    stability = (stabilities or {}).get(tuple(str(report.get(k)) for k in (  # type: ignore[arg-type]
        "scenario_id", "persona", "environment")))
    with os.scandir(run_dir) as entries:
        trial_dirs = sorted((Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)
                             and (Path(e.path) / TRIAL_REPORT).is_file()), key=_natural)
    suite.cases = [_trial_case(cell, trial_dir) for trial_dir in trial_dirs]
    if stability is not None:
        suite.properties.update(_stability_properties(stability))
        if stability.get("stability") == "flaky":
            for case in suite.cases:
                case.properties["flaky"] = "true"
    planned = report.get("planned_trials") or 0
    if type(planned) is not int:
        raise ConfigError("must be a whole number", source=run_dir / RUN_REPORT,
                          key="planned_trials")
    if planned > len(trial_dirs) and report.get("status") != "running":
        missing = planned - len(trial_dirs)
        suite.cases.append(_Case(
            classname=cell, name="planned trials", outcome="error", kind="incomplete",
            message=_one_line(report.get("message") or f"{missing} of {planned} planned trials "
                              "did not run"),
            details=f"{missing} of {planned} planned trials have no trial report",
            output=f"bundle: {run_dir}"))
    return suite


def _staged_suites(path: Path, prefix: str,
                   stabilities: dict[tuple[str, str, str], dict[str, object]]) -> list[_Suite]:
    """A staged sweep's suites, one per stage (None: the sweep is not staged)."""
    matrix = read_json(path / MATRIX_REPORT)
    stages = matrix.get("stages")
    if not isinstance(stages, list) or not all(isinstance(s, dict) for s in stages):
        raise ConfigError("must be a list of stages", source=path / MATRIX_REPORT,
                          key="stages")
    by_stage: dict[str, list[tuple[str, Path]]] = {}
    for cell in matrix.get("cells") or []:
        if isinstance(cell, dict) and isinstance(cell.get("stage"), str):
            by_stage.setdefault(cell["stage"], []).append(
                (cell["cell_id"], path / Path(str(cell.get("bundle_path"))).name))
    suites = []
    for stage in stages:
        name = str(stage.get("name"))
        suite = _Suite(prefix + name, properties={
            key: str(stage.get(key)) for key in ("status", "gate", "reason")})
        cost = stage.get("cost")
        if isinstance(cost, dict) and cost.get("total") is not None:
            suite.properties["cost"] = f"{cost.get('total')} {cost.get('currency') or ''}".strip()
        for cell, run_dir in by_stage.get(name, []):
            cell_suite = _run_suite(prefix + cell, run_dir, stabilities)
            suite.timestamp = suite.timestamp or cell_suite.timestamp
            suite.cases += cell_suite.cases
        gate = _Case(classname=prefix + name, name="gate", output=str(stage.get("reason", "")))
        status = stage.get("status")
        if status == "failed":
            gate.outcome, gate.kind = "failure", "stage gate"
        elif status != "passed":
            gate.outcome, gate.kind = "skipped", "stage not run"
        gate.message = _one_line(f"{stage.get('gate')}: {stage.get('reason')}")
        gate.details = gate.message
        suite.cases.append(gate)
        suites.append(suite)
    return suites


def _is_staged(path: Path) -> bool:
    return (path / MATRIX_REPORT).is_file() and \
        read_json(path / MATRIX_REPORT).get("stages") is not None


def _gate_suite(gates: Sequence[GateOutcome]) -> _Suite:
    suite = _Suite(GATE_SUITE)
    for gate in gates:
        case = _Case(classname=GATE_SUITE, name=gate.name, output=gate.message)
        if gate.blocks:
            case.outcome, case.kind = "failure", f"gate {gate.status}"
        elif gate.status != "passed":
            case.outcome, case.kind = "skipped", f"gate {gate.status}"
        case.message, case.details = _one_line(gate.message), gate.message
        suite.cases.append(case)
    return suite


# --- writing ----------------------------------------------------------------------------------

def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _counts(element: ET.Element, suites: Sequence[_Suite]) -> None:
    element.set("tests", str(sum(len(s.cases) for s in suites)))
    for outcome, attribute in (("failure", "failures"), ("error", "errors"),
                               ("skipped", "skipped")):
        element.set(attribute, str(sum(s.count(outcome) for s in suites)))
    element.set("time", f"{sum(c.seconds for s in suites for c in s.cases):.3f}")


def _element(suites: Sequence[_Suite], name: str) -> ET.Element:
    root = ET.Element("testsuites", {"name": _clean(name)})
    _counts(root, suites)
    for suite in suites:
        node = ET.SubElement(root, "testsuite", {"name": _clean(suite.name)})
        _counts(node, [suite])
        if suite.timestamp:
            node.set("timestamp", suite.timestamp)
        if suite.properties:
            properties = ET.SubElement(node, "properties")
            for key, value in suite.properties.items():
                ET.SubElement(properties, "property", {"name": key, "value": _clean(value)})
        for case in suite.cases:
            item = ET.SubElement(node, "testcase", {"classname": _clean(case.classname),
                                                    "name": _clean(case.name),
                                                    "time": f"{case.seconds:.3f}"})
            if case.properties:  # as pytest's record_property writes them
                properties = ET.SubElement(item, "properties")
                for key, value in case.properties.items():
                    ET.SubElement(properties, "property", {"name": key, "value": _clean(value)})
            if case.outcome is not None:
                outcome = ET.SubElement(item, case.outcome, {"message": _clean(case.message),
                                                             "type": case.kind})
                if case.outcome != "skipped":
                    outcome.text = _clean(case.details)
            if case.output:
                ET.SubElement(item, "system-out").text = _clean(case.output)
    return root


def junit_xml(runs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] = (), *,
              gates: Sequence[GateOutcome] = (), path: str | os.PathLike[str] | None = None,
              name: str = "voicelab", labels: Sequence[str] | None = None) -> str:
    """JUnit XML for run and sweep directories (``runs``) and ``compare`` gate results.

    ``labels``, one per run, prefix that run's suites and test ids (``baseline.<cell>``).

    Returns the document; with ``path``, also writes it there (atomically). Raises
    :class:`~voicelab.errors.ConfigError` for a directory that is neither a run nor a sweep.
    """
    if isinstance(runs, (str, os.PathLike)):
        runs = [runs]
    runs = list(runs)
    if labels is not None and len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
    prefixes = [f"{label}." for label in labels] if labels is not None else [""] * len(runs)
    suites = []
    for run, prefix in zip(runs, prefixes, strict=True):
        folder = Path(run).expanduser().resolve()
        stabilities = _stabilities(folder)
        if _is_staged(folder):
            suites += _staged_suites(folder, prefix, stabilities)
            continue
        suites += [_run_suite(prefix + cell, run_dir, stabilities)
                   for cell, run_dir in _cells(folder)]
    if gates:
        suites.append(_gate_suite(gates))
    root = _element(suites, name)
    ET.indent(root)
    document = ET.tostring(root, encoding="unicode", xml_declaration=False)
    text = f'<?xml version="1.0" encoding="UTF-8"?>\n{document}\n'
    if path is not None:
        atomic_write(Path(path), text.encode("utf-8"))
    return text
