"""The `OutcomeProbe` protocol: persisted product state, read after the conversation.

Constructor contract: ``Probe(settings)`` with the run's ``outcome_probe.settings`` mapping.
``probe(context)`` receives a mapping with ``session_id``, ``data`` (the opaque run data),
``scenario_id``, ``trial_index`` and ``seed``; it returns the observed values (compared with the
scenario's ``eval_spec.outcome_spec``) or ``None`` when the product has no record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class OutcomeProbe(Protocol):
    async def probe(self, context: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Query the product and return the persisted values this scenario cares about."""
