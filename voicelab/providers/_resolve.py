"""Resolving `providers.azure_openai` / `providers.openai` into one LLM target, and the
validate-time checks (package installed, credential present) that need no network."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .._extras import is_installed
from ..config import Providers
from ..errors import ConfigError, MissingDependencyError

ProviderName = Literal["azure_openai", "openai"]
PROVIDER_NAMES: tuple[ProviderName, ...] = ("azure_openai", "openai")

#: Environment variables consulted when the configuration leaves the key out.
AZURE_OPENAI_API_KEY_ENV = "AZURE_OPENAI_API_KEY"
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"


@dataclass(frozen=True)
class LLMProvider:
    """One resolved chat model: where it is, how to authenticate, and its sampling defaults.

    ``model`` is the Azure deployment name for ``azure_openai``. ``api_key`` never appears in
    ``repr`` or :meth:`describe`.
    """

    kind: ProviderName
    model: str
    endpoint: str | None = None
    base_url: str | None = None
    api_version: str | None = None
    auth: Literal["api_key", "default_credential"] = "api_key"
    api_key: str | None = field(default=None, repr=False)
    temperature: float | None = None
    seed: int | None = None

    @property
    def key_path(self) -> str:
        return f"providers.{self.kind}"

    def describe(self) -> dict[str, str | None]:
        """Secret-free identification for evidence and reports."""
        described: dict[str, str | None] = {"provider": self.kind, "model": self.model}
        if self.kind == "azure_openai":
            described.update(endpoint=self.endpoint, api_version=self.api_version, auth=self.auth)
        else:
            described["base_url"] = self.base_url
        return described


def require_package(module: str, package: str, *, purpose: str, key: str | None = None,
                    extra: str = "azure") -> None:
    if not is_installed(module):
        raise MissingDependencyError(package, extra=extra, purpose=purpose, key=key)


def select_provider_name(providers: Providers, *, preferred: str | None = None,
                         key: str = "provider") -> ProviderName:
    """``preferred`` when given (it must be configured), else azure_openai, else openai."""
    if preferred is not None:
        if preferred not in PROVIDER_NAMES:
            raise ConfigError(f"unknown provider {preferred!r}; expected one of "
                              f"{', '.join(PROVIDER_NAMES)}", key=key)
        configured = {"azure_openai": providers.azure_openai, "openai": providers.openai}
        if configured[preferred] is None:
            raise ConfigError(f"{key} is {preferred!r} but providers.{preferred} is not "
                              "configured", key=key)
        return preferred
    if providers.azure_openai is not None:
        return "azure_openai"
    if providers.openai is not None:
        return "openai"
    raise ConfigError("an LLM provider is needed: configure providers.azure_openai or "
                      "providers.openai", key=key)


def resolve_llm_provider(providers: Providers, *, preferred: str | None = None,
                         environ: Mapping[str, str] | None = None,
                         key: str = "provider") -> LLMProvider:
    """The configured provider as an :class:`LLMProvider`; keys fall back to the environment."""
    env = os.environ if environ is None else environ
    name = select_provider_name(providers, preferred=preferred, key=key)
    if name == "azure_openai":
        azure = providers.azure_openai
        assert azure is not None
        api_key = azure.api_key or (env.get(AZURE_OPENAI_API_KEY_ENV)
                                    if azure.auth == "api_key" else None)
        return LLMProvider("azure_openai", azure.model, endpoint=azure.endpoint,
                           api_version=azure.api_version, auth=azure.auth,
                           api_key=api_key or None, temperature=azure.temperature,
                           seed=azure.seed)
    generic = providers.openai
    assert generic is not None
    return LLMProvider("openai", generic.model,
                       base_url=generic.base_url or env.get(OPENAI_BASE_URL_ENV) or None,
                       api_key=generic.api_key or env.get(OPENAI_API_KEY_ENV) or None,
                       temperature=generic.temperature, seed=generic.seed)


def check_llm_provider(provider: LLMProvider, *, purpose: str,
                       modules: tuple[tuple[str, str], ...] = ()) -> None:
    """Validate-time check: ``openai`` (and ``modules``: (module, package) pairs) installed,
    azure-identity installed for ``default_credential``, and a key present for ``api_key``."""
    require_package("openai", "openai", purpose=purpose, key=provider.key_path)
    for module, package in modules:
        require_package(module, package, purpose=purpose, key=provider.key_path)
    if provider.kind == "azure_openai":
        if provider.auth == "default_credential":
            require_package("azure.identity", "azure-identity",
                            purpose=f"{purpose} (auth: default_credential)",
                            key="providers.azure_openai.auth")
        elif not provider.api_key:
            raise ConfigError("auth is api_key but no key is set: set api_key "
                              f"(e.g. ${{{AZURE_OPENAI_API_KEY_ENV}}}) or the "
                              f"{AZURE_OPENAI_API_KEY_ENV} environment variable",
                              key="providers.azure_openai.api_key")
    elif not provider.api_key:
        raise ConfigError("no api key is set: set api_key (e.g. "
                          f"${{{OPENAI_API_KEY_ENV}}}) or the {OPENAI_API_KEY_ENV} environment "
                          "variable (a self-hosted model without auth accepts any value)",
                          key="providers.openai.api_key")
