"""Simulated users: scripted, synthesizer (LLM) and realtime (speech-to-speech) personas."""

from .._registry import Registry
from ._protocol import (
    KeepsEvidence,
    Persona,
    PersonaContext,
    PersonaDecision,
    PersonaEnd,
    PlansTurns,
    ProductResponse,
    RecordedSpeech,
    UserTurn,
)
from ._replay import read_recorded_trial

#: The persona mode that follows a script (the ``script_turns_said`` verdict judges it).
SCRIPTED_MODE = "scripted"
#: The persona mode that sends a recorded trial's turns again (docs/replay.md).
REPLAY_MODE = "replay"

PERSONAS = Registry("persona mode", group="voicelab.personas", builtins={
    SCRIPTED_MODE: "voicelab.personas._scripted:ScriptedPersona",
    "synthesizer": "voicelab.personas._synthesizer:SynthesizerPersona",
    "realtime": "voicelab.personas._realtime:RealtimePersona",
    REPLAY_MODE: "voicelab.personas._replay:ReplayPersona",
})

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "KeepsEvidence",
    "PlansTurns",
]
