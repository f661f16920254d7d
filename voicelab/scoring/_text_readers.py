"""Which of a run's judgements read the product's words (they need a transcript of them)."""

from __future__ import annotations

from ..config import PersonaConfig, ScenarioConfig


def text_readers(scenario: ScenarioConfig, persona: PersonaConfig, *, judges: bool) -> list[str]:
    """What reads the product's words in this run: the text verdicts configured, and
    ``judges`` when the run has a quality evaluation."""
    readers = []
    if scenario.expected_topics:
        readers.append("expected_topics")
    if persona.is_concise:
        readers.append("concise")
    ivr = scenario.eval_spec.ivr
    if ivr is not None and ivr.prompts:
        readers.append("prompt_heard")
    if ivr is not None and ivr.max_seconds_to_agent is not None:
        readers.append("reached_agent")
    if judges:
        readers.append("judges")
    return readers
