"""A local OpenAI-compatible server (chat completions, Evals API) whose "model" is a rule engine.

The production ``openai`` and ``azure-ai-evaluation`` clients run against it end to end; see
``docs/judges.md``.
"""

from ._http import Fault, RecordedRequest
from ._policies import JudgePolicy, ModelCall, Policy, ScriptedPolicy, unsupported_claim_rule
from ._server import OpenAIServer, UsageCounts

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "JudgePolicy",
    "OpenAIServer",
    "ScriptedPolicy",
    "unsupported_claim_rule",
]
