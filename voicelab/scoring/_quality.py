"""Quality evaluation after a successful conversation: custom binary judges, Azure AI
evaluators and plug-in judges (``quality_evaluation.judges``) on the redacted transcript and
tool evidence.

Semantics: advisory judges are recorded but never gate; a critical judge that fails *or errors*
fails the trial; a judge that is unavailable (provider, package or credential missing), times
out (``timeout_seconds``, per judge) or answers something unparseable is ``status="error"``,
``passed=False`` and never a pass. :func:`evaluate_quality` never raises for a judge problem.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..artifacts import JudgeResult
from ..config import Providers, QualityEvaluation, SecretScrubber
from ..errors import VoicelabError
from ..providers import (
    JSONChat,
    LLMProvider,
    async_chat_client,
    check_llm_provider,
    evaluation_model_config,
    resolve_llm_provider,
)
from ._azure_evaluators import DEFAULT_THRESHOLDS, prepare_azure_evaluator
from ._evidence import ConversationEvidence, RedactedEvidence
from ._judge_plugins import plugin_judge_errors, prepare_plugin_judge, resolved_judges
from ._judges import PreparedJudge, error_result, prepare_chat_label_judge
from ._label_grader import prepare_label_grader
from ._redaction import Redactor

logger = logging.getLogger(__name__)

PURPOSE = "LLM judges (quality_evaluation)"
#: How many judges call out at once.
MAX_CONCURRENT_JUDGES = 4


def critical_judge_failures(results: Iterable[JudgeResult]) -> list[JudgeResult]:
    """Critical judges that did not pass (failed or errored): any one fails the trial."""
    return [result for result in results if result.critical and result.status != "passed"]


def judges_pass(results: Iterable[JudgeResult]) -> bool:
    """The judge gate: advisory results never count; every critical judge must have passed."""
    return not critical_judge_failures(results)


def _planned(quality: QualityEvaluation) -> list[tuple[str, str, bool, float | None]]:
    """The LLM judges: name, kind, critical, threshold (in configuration order)."""
    planned: list[tuple[str, str, bool, float | None]] = [
        (judge.name, "custom_judge", judge.is_critical, None) for judge in quality.custom_judges]
    planned += [(e.type, "azure_evaluator", e.is_critical,
                 e.threshold if e.threshold is not None else DEFAULT_THRESHOLDS[e.type])
                for e in quality.azure_evaluators]
    return planned


def _modules(quality: QualityEvaluation, provider: LLMProvider) -> tuple[tuple[str, str], ...]:
    if quality.azure_evaluators or (quality.custom_judges and provider.kind == "azure_openai"):
        return (("azure.ai.evaluation", "azure-ai-evaluation"),)
    return ()


def _unavailable(quality: QualityEvaluation, message: str) -> list[JudgeResult]:
    """Every LLM judge as an error result: none could run."""
    return [error_result(name, kind, critical, message, model=None, sent=None,
                         threshold=threshold) for name, kind, critical, threshold
            in _planned(quality)]


async def evaluate_quality(quality: QualityEvaluation, providers: Providers,
                           evidence: ConversationEvidence, *, scrubber: SecretScrubber,
                           environ: Mapping[str, str] | None = None,
                           credential: object = None,
                           search_dirs: Iterable[Path] = ()) -> list[JudgeResult]:
    """Run every configured judge; one :class:`JudgeResult` per judge, in configuration order
    (the LLM judges, then the plug-in judges: ``quality_evaluation.judges``, resolved with
    ``search_dirs`` beside the run file).

    ``credential`` (an azure-core ``TokenCredential``) replaces ``DefaultAzureCredential`` for
    ``auth: default_credential``.
    """
    if not quality.has_judges:
        return []
    redactor = Redactor(quality.redaction, scrubber=scrubber)
    try:
        redacted = redactor.evidence(evidence)
    except Exception as error:  # noqa: BLE001 - nothing unredacted may be sent: every judge errs
        logger.warning("redaction failed (%s); no judge was called", type(error).__name__)
        message = f"redaction failed, nothing was sent: {type(error).__name__}"
        return _unavailable(quality, message) + plugin_judge_errors(quality.judges, message)
    gate = asyncio.Semaphore(MAX_CONCURRENT_JUDGES)
    llm, plugins = await asyncio.gather(
        _llm_judges(quality, providers, redacted, redactor=redactor, gate=gate,
                    environ=environ, credential=credential),
        _plugin_judges(quality, redacted, redactor=redactor, gate=gate,
                       search_dirs=search_dirs))
    return llm + plugins


async def _plugin_judges(quality: QualityEvaluation, redacted: RedactedEvidence, *,
                         redactor: Redactor, gate: asyncio.Semaphore,
                         search_dirs: Iterable[Path]) -> list[JudgeResult]:
    """The plug-in judges' results; one that cannot be resolved or built (``validate``
    checked them, but the run file may have changed since) errs, never the trial."""
    if not quality.judges:
        return []
    try:
        judges = resolved_judges(quality, search_dirs=search_dirs)
    except VoicelabError as error:
        message = f"judge unavailable: {redactor.text(str(error))}"
        logger.warning("plug-in judges unavailable: %s", message)
        return plugin_judge_errors(quality.judges, message)
    prepared = [prepare_plugin_judge(config, judge, evidence=redacted, redactor=redactor)
                for config, judge in judges]
    return list(await asyncio.gather(*(
        _run_one(judge, gate=gate, timeout_seconds=quality.timeout_seconds, redactor=redactor)
        for judge in prepared)))


async def _llm_judges(quality: QualityEvaluation, providers: Providers,
                      redacted: RedactedEvidence, *, redactor: Redactor,
                      gate: asyncio.Semaphore, environ: Mapping[str, str] | None,
                      credential: object) -> list[JudgeResult]:
    """The custom judges' and Azure evaluators' results (none configured: none, and no
    provider is needed)."""
    if not quality.has_llm_judges:
        return []
    scrubber = redactor.scrubber
    try:
        provider = resolve_llm_provider(providers, preferred=quality.provider, environ=environ,
                                        key="quality_evaluation.provider")
        check_llm_provider(provider, purpose=PURPOSE, modules=_modules(quality, provider))
        model_config, token_credential = (
            evaluation_model_config(provider, purpose=PURPOSE, credential=credential)
            if _modules(quality, provider) else ({}, None))
    except VoicelabError as error:
        logger.warning("judges unavailable: %s", scrubber.scrub_text(str(error)))
        return _unavailable(quality, f"judge unavailable: {scrubber.scrub_text(str(error))}")

    chat_client = None
    prepared: list[PreparedJudge] = []
    try:
        for judge in quality.custom_judges:
            if provider.kind == "azure_openai":
                prepared.append(prepare_label_grader(judge, provider=provider,
                                                     model_config=model_config,
                                                     credential=token_credential,
                                                     evidence=redacted))
                continue
            if chat_client is None:
                chat_client = async_chat_client(provider, purpose=PURPOSE,
                                                timeout_seconds=quality.timeout_seconds,
                                                credential=credential)
            prepared.append(prepare_chat_label_judge(judge, chat=JSONChat(chat_client, provider),
                                                     provider=provider, evidence=redacted))
        for evaluator in quality.azure_evaluators:
            prepared.append(prepare_azure_evaluator(evaluator, provider=provider,
                                                    model_config=model_config,
                                                    credential=token_credential,
                                                    evidence=redacted))
        return list(await asyncio.gather(*(
            _run_one(judge, gate=gate, timeout_seconds=quality.timeout_seconds,
                     redactor=redactor) for judge in prepared)))
    except VoicelabError as error:
        return _unavailable(quality, f"judge unavailable: {scrubber.scrub_text(str(error))}")
    finally:
        if chat_client is not None:
            await chat_client.close()


async def _run_one(judge: PreparedJudge, *, gate: asyncio.Semaphore, timeout_seconds: float,
                   redactor: Redactor) -> JudgeResult:
    async with gate:
        try:
            return await asyncio.wait_for(judge.run(), timeout_seconds)
        except TimeoutError:
            message = f"timed out after {timeout_seconds:g} s"
        except Exception as error:  # noqa: BLE001 - any judge failure is an error result
            message = f"{type(error).__name__}: {error}"
    message = redactor.text(message)
    logger.warning("judge %s errored: %s", judge.name, message)
    return error_result(judge.name, judge.kind, judge.critical, message, model=judge.model,
                        sent=judge.sent, threshold=judge.threshold,
                        usage=judge.unknown_usage())


__all__ = ["ConversationEvidence", "RedactedEvidence", "critical_judge_failures",
           "evaluate_quality", "judges_pass"]
