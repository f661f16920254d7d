"""Validate-time checks of `quality_evaluation`: provider present, packages installed, credentials
set; plug-in judges resolved and their settings checked.

The same resolution the judges use at run time (``voicelab.providers``), so ``validate`` and
``run`` can never disagree about whether a judge can run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ._judge_plugins import check_plugin_judges

if TYPE_CHECKING:
    from ..config import LoadedRun, QualityEvaluation

logger = logging.getLogger(__name__)

#: The label grader polls the Evals API after a fixed wait of about 4.5 s.
LABEL_GRADER_MIN_TIMEOUT_SECONDS = 10.0


def check_quality_evaluation(loaded: LoadedRun) -> list[str]:
    """Names of the configured judges, after checking what they need is installed and set,
    and that every plug-in judge resolves and is built with its settings."""
    quality = loaded.run.quality_evaluation
    if quality is None:
        return []
    names = [f"{judge.name}{' (critical)' if judge.is_critical else ''}"
             for judge in quality.custom_judges]
    names += [f"{e.type}{' (critical)' if e.is_critical else ''}" for e in quality.azure_evaluators]
    if names:
        _check_llm_judges(loaded, quality)
    return names + check_plugin_judges(quality, search_dirs=[loaded.base_dir],
                                       source=loaded.run_path)


def _check_llm_judges(loaded: LoadedRun, quality: QualityEvaluation) -> None:
    """The provider the LLM judges call: configured, its packages installed, its credential set."""
    from ..providers import check_llm_provider, resolve_llm_provider

    try:
        provider = resolve_llm_provider(loaded.run.providers, preferred=quality.provider,
                                        key="quality_evaluation.provider")
        label_grader = bool(quality.custom_judges) and provider.kind == "azure_openai"
        modules = (("azure.ai.evaluation", "azure-ai-evaluation"),) \
            if quality.azure_evaluators or label_grader else ()
        check_llm_provider(provider, purpose="LLM judges", modules=modules)
    except ConfigError as error:
        if error.source is None:  # name the run file; keep the error type (and pip line)
            error.source = str(loaded.run_path)
            error.args = (error.one_line(),)
        raise
    if label_grader and quality.timeout_seconds < LABEL_GRADER_MIN_TIMEOUT_SECONDS:
        logger.warning("quality_evaluation.timeout_seconds is %g s: the Azure OpenAI label "
                       "grader needs about 5 s per judge; custom judges may time out",
                       quality.timeout_seconds)


def judge_provider_name(loaded: LoadedRun) -> str:
    """The provider judges use: explicit ``quality_evaluation.provider`` or the configured one."""
    from ..providers import select_provider_name

    quality = loaded.run.quality_evaluation
    return select_provider_name(loaded.run.providers,
                                preferred=quality.provider if quality else None)
