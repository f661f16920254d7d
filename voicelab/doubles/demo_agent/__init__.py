"""The local demo agent: a real voice agent on this machine with no credentials.

It speaks protocol v1, hears the user with pocketsphinx, follows a small rule-based dialogue for
the daily-plan-and-reminder example, speaks with piper and persists to SQLite. ``adapter:
local_agent`` starts one per trial (:class:`LocalAgentEndpoint`); ``python -m
voicelab.doubles.demo_agent`` runs it as a standalone server. See ``docs/demo-agent.md``.
"""

from ._endpoint import LocalAgentEndpoint, LocalAgentSettings
from ._rules import SpokenTime, parse_spoken_time, spoken_time
from ._server import AgentSessionRecord, LocalAgent
from ._store import LocalAgentProbe
from ._voice import LocalAgentBehaviour

__all__ = ["AgentSessionRecord", "LocalAgent", "LocalAgentBehaviour", "LocalAgentEndpoint",
           "LocalAgentProbe", "LocalAgentSettings", "SpokenTime", "parse_spoken_time",
           "spoken_time"]
