"""``rescore --set``: what may change when a bundle is judged again, and how it is applied.

A bundle's evidence (both channels' audio, every event) is fixed; what judges it is not. A
re-score may change the scenario's ``eval_spec`` (thresholds, limits, expected exit, outcome
spec, advisory verdicts), the run's ``measurement`` tolerances, its ``transcription`` (where
the product's words come from) and its ``quality_evaluation`` (the judges, run again with
``--judges RUN_FILE``). Anything else (the endpoint, the persona, the script, the seeds)
changed what was *said*: re-running, not re-scoring, answers that, so it is refused naming
the key.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Override, SecretScrubber, apply_overrides, format_key_path, recorded_overrides
from ..errors import ConfigError

#: (document, first key) an override may start with.
RESCORABLE = (("scenario", "eval_spec"), ("run", "measurement"), ("run", "transcription"),
              ("run", "quality_evaluation"))


def _where(override: Override) -> str:
    return format_key_path(((override.document,) if override.document != "run" else ())
                           + override.path)


@dataclass(frozen=True)
class RescoreOverrides:
    """The ``--set`` of a re-score, checked (:meth:`parse`) before anything is read."""

    given: tuple[Override, ...] = ()

    @classmethod
    def parse(cls, texts: Sequence[str], *, judges_given: bool) -> RescoreOverrides:
        parsed = tuple(Override.parse(text) for text in texts)
        for override in parsed:
            if (override.document, override.path[0] if override.path else None) \
                    not in RESCORABLE:
                raise ConfigError(
                    "cannot be re-scored: the evidence was recorded with it (run again, or "
                    "replay); rescore --set takes scenario.eval_spec.*, measurement.*, "
                    "transcription.* and quality_evaluation.*", source=override.label,
                    key=_where(override))
            if override.path[0] == "quality_evaluation" and not judges_given:
                raise ConfigError("judges run again only with --judges RUN_FILE (their "
                                  "providers and credentials)", source=override.label,
                                  key=_where(override))
        return cls(parsed)

    def __bool__(self) -> bool:
        return bool(self.given)

    def of(self, document: str, *, first: str | None = None) -> list[Override]:
        return [o for o in self.given if o.document == document
                and (first is None or o.path[0] == first)]

    def scenario(self, resolved: Any, *, file: str) -> Any:
        """The trial's resolved scenario with the ``scenario.eval_spec`` overrides."""
        chosen = self.of("scenario")
        return apply_overrides(copy.deepcopy(resolved), chosen, file=file) if chosen \
            else resolved

    def settings(self, resolved: Any, *, file: str) -> Any:
        """The trial's resolved settings with the measurement and transcription overrides."""
        chosen = [o for o in self.of("run") if o.path[0] != "quality_evaluation"]
        return apply_overrides(copy.deepcopy(resolved), chosen, file=file) if chosen \
            else resolved

    def judges(self) -> list[str]:
        """The overrides of the judges' run file (``--judges``)."""
        return [o.text for o in self.of("run", first="quality_evaluation")]

    def recorded(self) -> list[str]:
        """As the run report keeps them (a value under a secret-named key masked)."""
        return recorded_overrides([o.text for o in self.given], SecretScrubber(set()))


#: No override: the evidence judged as the trial recorded.
AS_RECORDED = RescoreOverrides()
