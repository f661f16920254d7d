"""The runner's entry to LLM judges (``quality_evaluation``), after a successful execution."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..artifacts import JudgeResult, ToolCallRecord, TranscriptTurn

if TYPE_CHECKING:
    from ..config import LoadedRun


async def run_judges(loaded: LoadedRun, transcript: Sequence[TranscriptTurn],
                     tool_calls: Sequence[ToolCallRecord]) -> list[JudgeResult]:
    """Every configured judge's result; a judge that cannot run is an ``error`` result, never a pass."""
    quality = loaded.run.quality_evaluation
    if quality is None or not quality.has_judges:
        return []
    from ._quality import ConversationEvidence, evaluate_quality

    evidence = ConversationEvidence(transcript=list(transcript), tool_calls=list(tool_calls),
                                    scenario=loaded.scenario, persona=loaded.persona,
                                    data=loaded.data)
    return await evaluate_quality(quality, loaded.run.providers, evidence,
                                  scrubber=loaded.scrubber, environ=os.environ,
                                  search_dirs=[loaded.base_dir])
