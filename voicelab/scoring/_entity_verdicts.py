"""The entity verdicts: ``entities_heard`` (every key entity the user said, the product heard
exactly) and ``entities_spoken`` (every entity the product's text or tool results say, its
audio says exactly). Inputs: voice-metrics.json ``entities`` (:mod:`voicelab.metrics`)."""

from __future__ import annotations

from ..artifacts import EntityCheck, EntityMetrics, Verdict
from ._evidence import TrialEvidence
from ._verdict_registry import verdict


def _inconclusive(name: str, expected: str, missing: str) -> Verdict:
    return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                   observed=None, why=f"inconclusive: {missing}")


def _describe(check: EntityCheck) -> str:
    return f"{check.name} in {check.turn_id}: {check.why}"


def _decide(name: str, expected: str, checks: list[EntityCheck], nothing: str) -> Verdict:
    """Failed when an entity was wrong; inconclusive when none was wrong but one could not be
    compared (no words for its turn), or there was nothing to check; passed otherwise."""
    wrong = [c for c in checks if c.correct is False]
    undecided = [c for c in checks if c.correct is None]
    right = [c for c in checks if c.correct]
    observed = {c.name: c.correct for c in checks}
    if wrong:
        return Verdict(name=name, passed=False, expected=expected, observed=observed,
                       why="; ".join(_describe(c) for c in wrong))
    if undecided:
        return Verdict(name=name, passed=False, status="inconclusive", expected=expected,
                       observed=observed,
                       why="inconclusive: " + "; ".join(_describe(c) for c in undecided))
    if not right:
        return _inconclusive(name, expected, nothing)
    return Verdict(name=name, passed=True, expected=expected, observed=observed,
                   why=f"all {len(right)} exact: " + ", ".join(
                       sorted({f"{c.name} ({c.source})" for c in right})))


def _entities(evidence: TrialEvidence) -> EntityMetrics:
    """The trial's entity metrics (asked for only when there are some)."""
    if evidence.entities is None:
        raise ValueError("the trial has no entity metrics")
    return evidence.entities


@verdict("entities_heard", needs=("entities", "expectations"),
         when=lambda e: e.entities is not None and e.spec.entities_heard)
def entities_heard(evidence: TrialEvidence) -> Verdict:
    """Every key entity the user said, the product heard exactly (omitted when the scenario
    marks no entities: the trial then has no entity metrics)."""
    entities = _entities(evidence)
    return _decide(
        "entities_heard", "every entity the user said heard exactly", entities.input,
        "the user said none of the scenario's entities"
        + (f" ({', '.join(entities.not_said)})" if entities.not_said else ""))


@verdict("entities_spoken", needs=("entities", "expectations"),
         when=lambda e: e.entities is not None and e.spec.entities_spoken)
def entities_spoken(evidence: TrialEvidence) -> Verdict:
    """Every entity the product's text or tool results say, its audio says exactly."""
    return _decide(
        "entities_spoken", "every entity in the product's text said exactly in its audio",
        _entities(evidence).output, "no response's transcript said an entity")
