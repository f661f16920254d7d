"""Validate-time checks of `quality_evaluation`: provider present, packages installed, credentials set."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

from ..errors import ConfigError, MissingDependencyError

if TYPE_CHECKING:
    from ..config import LoadedRun


def _require_package(module: str, package: str, *, extra: str, purpose: str, source: str,
                     key: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(package, extra=extra, purpose=purpose, source=source, key=key)


def judge_provider_name(loaded: LoadedRun) -> str:
    """The provider judges use: explicit ``quality_evaluation.provider`` or the only one configured."""
    quality = loaded.run.quality_evaluation
    assert quality is not None
    source = str(loaded.run_path)
    if quality.provider is not None:
        if getattr(loaded.run.providers, quality.provider) is None:
            raise ConfigError(f"quality_evaluation.provider is {quality.provider!r} but "
                              f"providers.{quality.provider} is not configured", source=source,
                              key="quality_evaluation.provider")
        return quality.provider
    if loaded.run.providers.azure_openai is not None:
        return "azure_openai"
    if loaded.run.providers.openai is not None:
        return "openai"
    raise ConfigError("judges need providers.azure_openai or providers.openai", source=source,
                      key="quality_evaluation")


def check_quality_evaluation(loaded: LoadedRun) -> list[str]:
    """Names of the configured judges, after checking what they need is installed and set."""
    quality = loaded.run.quality_evaluation
    if quality is None:
        return []
    names = [f"{judge.name}{' (critical)' if judge.is_critical else ''}"
             for judge in quality.custom_judges]
    names += [f"{e.type}{' (critical)' if e.is_critical else ''}" for e in quality.azure_evaluators]
    if not names:
        return []
    source = str(loaded.run_path)
    provider = judge_provider_name(loaded)
    _require_package("openai", "openai", extra="azure", purpose="LLM judges",
                     source=source, key=f"providers.{provider}")
    if quality.azure_evaluators:
        _require_package("azure.ai.evaluation", "azure-ai-evaluation", extra="azure",
                         purpose="azure_evaluators", source=source,
                         key="quality_evaluation.azure_evaluators")
    if provider == "azure_openai":
        settings = loaded.run.providers.azure_openai
        assert settings is not None
        if settings.auth == "api_key" and not settings.api_key:
            raise ConfigError("auth is api_key but no api_key is set (use ${AZURE_OPENAI_API_KEY})",
                              source=source, key="providers.azure_openai.api_key")
        if settings.auth == "default_credential":
            _require_package("azure.identity", "azure-identity", extra="azure",
                             purpose="auth: default_credential", source=source,
                             key="providers.azure_openai.auth")
    else:
        settings_openai = loaded.run.providers.openai
        assert settings_openai is not None
        if not settings_openai.api_key and not os.environ.get("OPENAI_API_KEY"):
            raise ConfigError("no api_key is set (use ${OPENAI_API_KEY})", source=source,
                              key="providers.openai.api_key")
    return names
