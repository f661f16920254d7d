"""The `OutcomeProbe` protocol: persisted product state, read after the conversation.

Constructor contract: ``Probe(settings)`` with the run's ``outcome_probe.settings`` mapping; it
does no I/O (connect in ``probe``). ``voice-evaluator validate`` checks the settings before any
call, by the probe's own model: declare it as the class attribute ``settings_model`` (a pydantic
model with ``extra="forbid"``, so a typo is an unknown setting naming the allowed ones) and/or a
``check_settings(settings)`` classmethod; a probe with neither is built once at validation to
find a missing or bad setting. Either way a settings mistake is exit 2 naming the run file and
``outcome_probe.settings.<key>``, never a failed outcome verdict blamed on the product.
``probe(context)`` receives a mapping with ``session_id``, ``data`` (the opaque run data),
``scenario_id``, ``trial_index`` and ``seed``; it returns the observed values (compared with the
scenario's ``eval_spec.outcome_spec``) or ``None`` when the product has no record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class OutcomeProbe(Protocol):
    async def probe(self, context: Mapping[str, object]) -> Mapping[str, Any] | None:
        """Query the product and return the persisted values this scenario cares about."""
