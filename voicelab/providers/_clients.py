"""Client factories: the ``openai`` SDK and azure-identity are imported here, only when a run
selects them, and a missing package becomes :class:`MissingDependencyError`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import MissingDependencyError
from ._resolve import LLMProvider

if TYPE_CHECKING:
    import openai
    from azure.identity import DefaultAzureCredential


class _ClientOptions(TypedDict):
    timeout: float
    max_retries: int

#: The Entra ID scope Azure OpenAI tokens are requested for.
COGNITIVE_SERVICES_SCOPE = "https://cognitiveservices.azure.com/.default"


def import_openai(purpose: str) -> Any:
    try:
        import openai
    except ImportError:
        raise MissingDependencyError("openai", extra="azure", purpose=purpose,
                                     key="providers") from None
    return openai


def default_credential(purpose: str) -> DefaultAzureCredential:
    """``azure.identity.DefaultAzureCredential()`` (sync; it caches its tokens)."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError:
        raise MissingDependencyError("azure-identity", extra="azure",
                                     purpose=f"{purpose} (auth: default_credential)",
                                     key="providers.azure_openai.auth") from None
    return DefaultAzureCredential()


def async_token_provider(credential: Any) -> Callable[[], Awaitable[str]]:
    """An async bearer-token callable from a sync or async azure-core ``TokenCredential``.

    A sync credential runs in a thread so a first, slow token fetch never blocks the event loop.
    """

    async def token() -> str:
        if inspect.iscoroutinefunction(credential.get_token):
            access = await credential.get_token(COGNITIVE_SERVICES_SCOPE)
        else:
            access = await asyncio.to_thread(credential.get_token, COGNITIVE_SERVICES_SCOPE)
        return access.token

    return token


def async_chat_client(provider: LLMProvider, *, purpose: str, timeout_seconds: float = 60.0,
                      max_retries: int = 2, credential: object = None) -> openai.AsyncOpenAI:
    """An ``openai.AsyncAzureOpenAI`` or ``openai.AsyncOpenAI`` for ``provider``.

    ``credential`` (any azure-core ``TokenCredential``) overrides ``DefaultAzureCredential`` for
    ``auth: default_credential``. Close the client with ``await client.close()``.
    """
    openai = import_openai(purpose)
    common: _ClientOptions = {"timeout": timeout_seconds, "max_retries": max_retries}
    if provider.kind == "azure_openai":
        if provider.auth == "api_key":
            return openai.AsyncAzureOpenAI(azure_endpoint=provider.endpoint,
                                           api_version=provider.api_version,
                                           api_key=provider.api_key, **common)
        token_credential = credential if credential is not None else default_credential(purpose)
        return openai.AsyncAzureOpenAI(azure_endpoint=provider.endpoint,
                                       api_version=provider.api_version,
                                       azure_ad_token_provider=async_token_provider(
                                           token_credential), **common)
    return openai.AsyncOpenAI(base_url=provider.base_url, api_key=provider.api_key, **common)


def evaluation_model_config(provider: LLMProvider, *, purpose: str,
                            credential: object = None) -> tuple[dict[str, str | None], Any]:
    """``(model_config, credential)`` for azure-ai-evaluation evaluators and graders.

    Azure OpenAI gives an ``AzureOpenAIModelConfiguration`` (with ``api_key``, or no key and a
    ``TokenCredential`` the SDK exchanges for tokens); a generic provider gives an
    ``OpenAIModelConfiguration`` whose ``base_url`` may point anywhere, 127.0.0.1 included.
    """
    if provider.kind == "azure_openai":
        config: dict[str, str | None] = {"type": "azure_openai", "azure_endpoint": provider.endpoint,
                                  "azure_deployment": provider.model,
                                  "api_version": provider.api_version}
        if provider.auth == "api_key":
            config["api_key"] = provider.api_key
            return config, None
        return config, credential if credential is not None else default_credential(purpose)
    config = {"type": "openai", "model": provider.model, "api_key": provider.api_key}
    if provider.base_url:
        config["base_url"] = provider.base_url
    return config, None
