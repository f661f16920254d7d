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

__all__ = [
    "COGNITIVE_SERVICES_SCOPE",
    "PROVIDER_NAMES",
    "ChatJSONReply",
    "JSONChat",
    "LLMCallError",
    "LLMProvider",
    "ProviderName",
    "UnparseableReplyError",
    "async_chat_client",
    "async_token_provider",
    "check_llm_provider",
    "default_credential",
    "evaluation_model_config",
    "import_openai",
    "is_installed",
    "parse_json_object",
    "require_package",
    "resolve_llm_provider",
    "select_provider_name",
]
