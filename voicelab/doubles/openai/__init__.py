"""A local OpenAI-compatible server (chat completions, Evals API) whose "model" is a rule engine.

The production ``openai`` and ``azure-ai-evaluation`` clients run against it end to end; see
``docs/judges.md``.
"""

from ._policies import JudgePolicy, ModelCall, Policy, ScriptedPolicy, unsupported_claim_rule
from ._server import Fault, OpenAIServer, RecordedRequest, UsageCounts

__all__ = ["Fault", "JudgePolicy", "ModelCall", "OpenAIServer", "Policy", "RecordedRequest",
           "ScriptedPolicy", "UsageCounts", "unsupported_claim_rule"]
