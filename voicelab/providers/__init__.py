"""LLM providers: `providers.azure_openai` and `providers.openai` (any OpenAI-compatible service).

Nothing here imports ``openai`` or ``azure.identity`` at module import time; the factories do,
and a missing package raises :class:`voicelab.errors.MissingDependencyError`.
"""

from ._chat import ChatJSONReply, JSONChat, LLMCallError, UnparseableReplyError, parse_json_object
from ._clients import (
    COGNITIVE_SERVICES_SCOPE,
    async_chat_client,
    async_token_provider,
    default_credential,
    evaluation_model_config,
    import_openai,
)
from ._resolve import (
    PROVIDER_NAMES,
    LLMProvider,
    ProviderName,
    check_llm_provider,
    is_installed,
    require_package,
    resolve_llm_provider,
    select_provider_name,
)

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "JSONChat",
    "LLMProvider",
    "async_chat_client",
    "check_llm_provider",
    "evaluation_model_config",
    "resolve_llm_provider",
]
