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

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
