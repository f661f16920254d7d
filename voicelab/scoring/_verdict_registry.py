"""Verdicts as registered functions: each declares the evidence it reads and when it is asked.

A verdict is a function of one :class:`TrialEvidence` decorated with :func:`verdict`::

    @verdict("no_refund_promised", needs=("transcript",))
    def no_refund_promised(evidence: TrialEvidence) -> Verdict: ...

The decorator returns a :class:`VerdictCheck` (still callable as the function). Scoring
iterates an ordered tuple of checks: the built-in ones (:data:`BUILTIN_VERDICTS` in
:mod:`._verdicts`, in the order trial reports have always listed them), then the run file's
own (``verdicts:``, dotted paths resolved like every plug-in, :func:`user_verdicts`). Nothing
registers itself into a process-wide list: a notebook that imports a module of verdicts
changes no other run.

Applicability, decided here once for every verdict:

* **asked for** (``when``): a verdict whose configuration is absent (no ``expected_topics``,
  no ``max_first_audio_latency_ms``) is omitted from the trial report, as it always was: a
  report lists what the scenario asked, and an omitted verdict neither passes nor fails.
* **applicable** (``needs``): a recorded call (``ingest``) has no simulated ending, no outcome
  probe, no selectivity probes and no script (:data:`RECORDED_CALL_LACKS`); a verdict that
  reads one of those is kept with ``status: not_applicable`` and the reason (the bundle's
  existing status: it neither passes nor fails the trial, nor counts in any rate).
* **evaluated**: a verdict that raises (or returns something other than verdicts) is a
  failed verdict whose reason names the error: never a crash, never a pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from .._registry import import_dotted
from ..artifacts import Verdict
from ..errors import ConfigError
from ._evidence import TrialEvidence

logger = logging.getLogger(__name__)

#: The evidence a verdict can declare it reads (the fields of :class:`TrialEvidence`).
Need = Literal["transcript", "tool_calls", "ending", "outcome", "turn_metrics", "timing",
               "probes", "entities", "script", "persona", "expectations"]
NEEDS: tuple[Need, ...] = get_args(Need)

#: What a recorded call does not have, and why a verdict reading it does not apply to one.
RECORDED_CALL_LACKS: dict[Need, str] = {
    "ending": "a recorded call ends when its recording does (call_ended): there is no "
              "simulated ending to compare",
    "outcome": "no outcome probe reads the product's state after a recorded call",
    "probes": "selectivity probes are said by a simulated caller",
    "script": "a recorded caller follows no script",
}

VerdictFunction = Callable[[TrialEvidence], "Verdict | Sequence[Verdict]"]
Condition = Callable[[TrialEvidence], bool]


def always(evidence: TrialEvidence) -> bool:
    """Asked for on every trial (a verdict without configuration of its own)."""
    return True


@dataclass(frozen=True)
class VerdictCheck:
    """A registered verdict: its name, the function, what it reads and when it is asked.

    ``name`` is the verdict's name in the trial report; a check that yields several verdicts
    (``outcome_<key>``: one per key) names the family."""

    name: str
    function: VerdictFunction
    needs: tuple[Need, ...]
    when: Condition = always

    def __call__(self, evidence: TrialEvidence) -> Verdict | Sequence[Verdict]:
        return self.function(evidence)

    def produces(self, name: str) -> bool:
        """``name`` is a verdict this check writes (a family by its prefix)."""
        family, bracket, _ = self.name.partition("<")
        return name.startswith(family) if bracket else name == self.name

    def not_applicable_because(self, evidence: TrialEvidence) -> str | None:
        """Why this verdict does not apply to ``evidence`` (``None``: it applies)."""
        if not evidence.recorded_call:
            return None
        return next((RECORDED_CALL_LACKS[need] for need in self.needs
                     if need in RECORDED_CALL_LACKS), None)

    def evaluate(self, evidence: TrialEvidence) -> list[Verdict]:
        """The verdicts of this check; one failed verdict saying why when it raised."""
        try:
            result = self.function(evidence)
            verdicts = [result] if isinstance(result, Verdict) else list(result)
            if not all(isinstance(v, Verdict) for v in verdicts):
                raise TypeError("it returned something other than Verdict objects")
        except Exception as error:  # noqa: BLE001 - a plug-in's fault is its verdict's failure
            logger.warning("verdict %s could not be evaluated", self.name, exc_info=True)
            return [Verdict(name=self.name, passed=False, status="failed",
                            why=f"could not be evaluated: {type(error).__name__}: {error}")]
        return verdicts


def verdict(name: str, *, needs: Iterable[Need],
            when: Condition = always) -> Callable[[VerdictFunction], VerdictCheck]:
    """Register a function of :class:`TrialEvidence` as the verdict ``name``.

    ``needs``: the evidence it reads (:data:`NEEDS`): it decides where the verdict applies;
    ``when``: whether the trial's configuration asks for it (omitted otherwise)."""
    declared = tuple(needs)
    unknown = [need for need in declared if need not in NEEDS]
    if unknown or not name:
        raise ValueError(f"verdict {name!r}: unknown needs {unknown} (known: "
                         f"{', '.join(NEEDS)})" if unknown else "a verdict needs a name")

    def register(function: VerdictFunction) -> VerdictCheck:
        return VerdictCheck(name=name, function=function, needs=declared, when=when)

    return register


def judge_verdicts(evidence: TrialEvidence, checks: Sequence[VerdictCheck],
          kept: Sequence[Verdict] = ()) -> list[Verdict]:
    """Every verdict of ``checks`` the trial asks for, in their order, each applicable or
    ``not_applicable``; then ``kept`` (verdicts carried over as recorded: a re-score keeps
    the run file's own verdicts, see :func:`plugin_verdicts`); the scenario's
    ``advisory_verdicts`` are made non-critical last."""
    verdicts: list[Verdict] = []
    for check in checks:
        if not check.when(evidence):
            continue
        why = check.not_applicable_because(evidence)
        for found in check.evaluate(evidence):
            verdicts.append(found if why is None else _not_applicable(found, why))
    verdicts += [v.model_copy(deep=True) for v in kept]
    advisory = set(evidence.spec.advisory_verdicts)
    for found in verdicts:
        if found.name in advisory:
            found.critical = False
    return verdicts


def _not_applicable(verdict: Verdict, why: str) -> Verdict:
    """``verdict`` as a recorded call has it: what it expected, nothing observed."""
    return Verdict(name=verdict.name, passed=False, status="not_applicable",
                   critical=verdict.critical, expected=verdict.expected, observed=None,
                   why=f"not applicable: {why}")


def _named(checks: Iterable[VerdictCheck]) -> Iterator[str]:
    return (check.name for check in checks)


def user_verdicts(paths: Sequence[str], *, builtin: Sequence[VerdictCheck],
                  search_dirs: Iterable[Path] = (), source: str | Path | None = None
                  ) -> tuple[VerdictCheck, ...]:
    """The run file's ``verdicts:`` (dotted paths of functions decorated with
    :func:`verdict`), resolved as every plug-in is (``search_dirs``: the run file's folder);
    a path that is not a verdict, or a name already taken, is a configuration error."""
    taken = set(_named(builtin))
    checks: list[VerdictCheck] = []
    for index, path in enumerate(paths):
        key = f"verdicts[{index}]"
        found = import_dotted(path, search_dirs=search_dirs, source=source, key=key)
        if not isinstance(found, VerdictCheck):
            raise ConfigError(f"{path!r} is not a verdict: decorate the function with "
                              f"@voicelab.scoring.verdict(name, needs=...)",
                              source=source, key=key)
        if found.name in taken:
            raise ConfigError(f"{path!r} is named {found.name!r}, which another verdict "
                              f"already is", source=source, key=key)
        taken.add(found.name)
        checks.append(found)
    return tuple(checks)


def plugin_verdicts(recorded: Sequence[Verdict], builtin: Sequence[VerdictCheck]
                    ) -> list[Verdict]:
    """The verdicts of a trial report that no built-in check writes: the run file's own.
    A re-score keeps them as recorded: nothing executable is taken from a bundle."""
    return [v for v in recorded if not any(check.produces(v.name) for check in builtin)]
