"""Building the per-trial contexts handed to personas, speech providers and endpoints."""

from __future__ import annotations

import os

from ..config import LoadedRun
from ..personas import PersonaContext


def persona_context(loaded: LoadedRun, *, trial_index: int, seed: int) -> PersonaContext:
    return PersonaContext(
        scenario=loaded.scenario,
        persona=loaded.persona,
        data=loaded.data,
        script=loaded.script,
        providers=loaded.run.providers,
        seed=seed,
        trial_index=trial_index,
        scrubber=loaded.scrubber,
        base_dir=loaded.base_dir,
        environ=os.environ,
        speech_provider=loaded.run.speech_provider,
        voice=loaded.script.persona_voice if loaded.script else None,
    )
