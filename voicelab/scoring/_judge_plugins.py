"""Judges a class runs (``quality_evaluation.judges``): the :class:`Judge` contract, the
``voicelab.judges`` registry, the check ``validate`` and ``rescore`` make before any trial, and
the turning of a judge's :class:`JudgeVerdict` into a :class:`JudgeResult`.

A judge class is resolved like every plug-in (a built-in name, a name an installed distribution
registers under the entry-point group ``voicelab.judges``, or ``module:Class``), built as
``Judge(settings)`` and asked ``await judge.judge(evidence)`` with the same redacted evidence
the LLM judges receive. What it answers is bounded and scrubbed before it is written: a judge
is the user's code, but what it quotes comes from the product's side of the call.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from .._registry import Registry
from ..artifacts import JudgeResult
from ..config import JudgeConfig, QualityEvaluation, format_key_path, parse_settings
from ..errors import ConfigError
from ._evidence import RedactedEvidence
from ._judges import PreparedJudge, error_result
from ._redaction import Redactor

#: The kind a plug-in judge's result records.
PLUGIN_KIND = "plugin"
#: A label longer than this is cut (a label names a class of answer, not an essay).
MAX_LABEL_CHARS = 200
#: A reason longer than this is cut, and says so.
MAX_REASON_CHARS = 2000

JUDGES = Registry("judge", group="voicelab.judges", builtins={
    "keywords": "voicelab.scoring._keyword_judge:KeywordJudge",
})


@dataclass(frozen=True)
class JudgeVerdict:
    """What a judge answers: whether the trial passed by its criterion, and optionally a label,
    a score and the reason (recorded as the result's ``rationale``)."""

    passed: bool
    label: str | None = None
    score: float | None = None
    reason: str | None = None


@runtime_checkable
class Judge(Protocol):
    """A judge class: built once per trial as ``Judge(settings)`` (``settings``: the run file's
    mapping). Optional class attributes: ``settings_model`` (a pydantic model the settings are
    checked against) and a ``check_settings(settings)`` classmethod; both run at ``validate``."""

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        """The verdict on one trial's redacted evidence."""
        ...


@runtime_checkable
class DeclaresJudgeSettings(Protocol):
    """A judge class's optional pydantic model of its settings."""

    settings_model: type[BaseModel]


@runtime_checkable
class ChecksJudgeSettings(Protocol):
    """A judge class's optional settings check (a classmethod)."""

    def check_settings(self, settings: Mapping[str, object]) -> None: ...


def judge_key(index: int, field: str | None = None) -> str:
    """``quality_evaluation.judges[0].settings``: where an error points in the run file."""
    parts: list[object] = ["quality_evaluation", "judges", index]
    return format_key_path([*parts, field] if field else parts)


def load_judge_class(name: str, *, search_dirs: Iterable[Path] = (),
                     source: str | Path | None = None, key: str | None = None) -> type[Judge]:
    """The class ``name`` resolves to, checked to be a class with an ``async def judge``."""
    target = JUDGES.resolve(name, search_dirs=search_dirs, source=source, key=key)
    if not inspect.isclass(target):
        raise ConfigError(f"{name!r} is not a class", source=source, key=key)
    if not issubclass(target, Judge) or not inspect.iscoroutinefunction(target.judge):
        raise ConfigError(f"{name!r} is not a judge: missing 'async def judge(self, evidence)'",
                          source=source, key=key)
    return target


def build_judge(judge_cls: type[Judge], config: JudgeConfig, *, index: int,
                source: str | Path | None = None) -> Judge:
    """``judge_cls(settings)``, after its settings model and check; a failure is a
    :class:`ConfigError` naming the judge's settings."""
    key = judge_key(index, "settings")
    settings = dict(config.settings)
    if isinstance(judge_cls, DeclaresJudgeSettings):
        model = judge_cls.settings_model
        if not (inspect.isclass(model) and issubclass(model, BaseModel)):
            raise ConfigError("the judge's settings_model is not a pydantic model",
                              source=source, key=judge_key(index, "judge"))
        parse_settings(model, settings, key=key, source=source)
    try:
        if isinstance(judge_cls, ChecksJudgeSettings):
            judge_cls.check_settings(settings)
        return judge_cls(settings)  # type: ignore[call-arg]  # the contract: Judge(settings)
    except ConfigError as error:
        raise ConfigError(error.message, source=source, key=error.key or key) from None
    except Exception as error:  # noqa: BLE001 - a judge that cannot be built is a config error
        raise ConfigError(f"the judge could not be built: {type(error).__name__}: {error}",
                          source=source, key=key) from None


def resolved_judges(quality: QualityEvaluation | None, *, search_dirs: Iterable[Path] = (),
                    source: str | Path | None = None) -> list[tuple[JudgeConfig, Judge]]:
    """Each configured plug-in judge, resolved and built (in configuration order)."""
    if quality is None:
        return []
    directories = list(search_dirs)
    built = []
    for index, config in enumerate(quality.judges):
        judge_cls = load_judge_class(config.judge, search_dirs=directories, source=source,
                                     key=judge_key(index, "judge"))
        built.append((config, build_judge(judge_cls, config, index=index, source=source)))
    return built


def check_plugin_judges(quality: QualityEvaluation | None, *, search_dirs: Iterable[Path] = (),
                        source: str | Path | None = None) -> list[str]:
    """``validate``'s (and ``rescore --judges``') check: every plug-in judge resolves and is
    built with its settings once; their names for the summary."""
    return [f"{config.name}{' (critical)' if config.is_critical else ''}"
            for config, _ in resolved_judges(quality, search_dirs=search_dirs, source=source)]


def _bounded(text: str, limit: int, redactor: Redactor) -> str:
    """``text`` scrubbed, then cut at ``limit`` characters (saying so)."""
    scrubbed = redactor.text(text)
    if len(scrubbed) <= limit:
        return scrubbed
    return scrubbed[:limit] + f" [cut: {len(scrubbed)} characters]"


def verdict_result(config: JudgeConfig, verdict: object, *, redactor: Redactor,
                   sent: object) -> JudgeResult:
    """The :class:`JudgeResult` of what a judge answered; anything but a well-formed
    :class:`JudgeVerdict` is an error result, never a pass."""
    def failed(message: str) -> JudgeResult:
        return error_result(config.name, PLUGIN_KIND, config.is_critical, message, model=None,
                            sent=sent)
    if not isinstance(verdict, JudgeVerdict):
        return failed(f"the judge answered a {type(verdict).__name__}, not a JudgeVerdict")
    if not isinstance(verdict.passed, bool):
        return failed(f"the judge's passed is a {type(verdict.passed).__name__}, not a bool")
    score = verdict.score
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)
                              or not math.isfinite(score)):
        return failed("the judge's score is not a finite number")
    for field, value in (("label", verdict.label), ("reason", verdict.reason)):
        if value is not None and not isinstance(value, str):
            return failed(f"the judge's {field} is a {type(value).__name__}, not a str")
    label = _bounded(verdict.label, MAX_LABEL_CHARS, redactor) if verdict.label else None
    reason = _bounded(verdict.reason, MAX_REASON_CHARS, redactor) if verdict.reason else None
    return JudgeResult(name=config.name, kind=PLUGIN_KIND, critical=config.is_critical,
                       status="passed" if verdict.passed else "failed", passed=verdict.passed,
                       label=label, score=float(score) if score is not None else None,
                       rationale=reason, sent=sent)


def prepare_plugin_judge(config: JudgeConfig, judge: Judge, *, evidence: RedactedEvidence,
                         redactor: Redactor) -> PreparedJudge:
    """One plug-in judge ready to run beside the LLM judges (same timeout and error handling)."""
    sent = evidence.as_dict()

    async def run() -> JudgeResult:
        verdict = await judge.judge(evidence)
        return verdict_result(config, verdict, redactor=redactor, sent=sent)

    return PreparedJudge(config.name, PLUGIN_KIND, config.is_critical, None, sent, run)


def plugin_judge_errors(judges: Sequence[JudgeConfig], message: str) -> list[JudgeResult]:
    """Every plug-in judge as an error result (``message``: why none could run)."""
    return [error_result(config.name, PLUGIN_KIND, config.is_critical, message, model=None,
                         sent=None) for config in judges]
