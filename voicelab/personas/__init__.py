"""Simulated users: scripted, synthesizer (LLM) and realtime (speech-to-speech) personas."""

from .._registry import Registry
from ._protocol import (
    Persona,
    PersonaContext,
    PersonaDecision,
    PersonaEnd,
    ProductResponse,
    RecordedSpeech,
    UserTurn,
)
from ._replay import read_recorded_trial

PERSONAS = Registry("persona mode", {
    "scripted": "voicelab.personas._scripted:ScriptedPersona",
    "synthesizer": "voicelab.personas._synthesizer:SynthesizerPersona",
    "realtime": "voicelab.personas._realtime:RealtimePersona",
    "replay": "voicelab.personas._replay:ReplayPersona",
})

__all__ = [
    "PERSONAS",
    "Persona",
    "PersonaContext",
    "PersonaDecision",
    "PersonaEnd",
    "ProductResponse",
    "RecordedSpeech",
    "UserTurn",
    "read_recorded_trial",
]
