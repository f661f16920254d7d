"""Plug-in judges (``quality_evaluation.judges``): the built-in ``keywords`` judge, what
``evaluate_quality`` makes of a judge that raises or answers nonsense, the redaction every
judge gets, the bounds on what a judge writes, and the settings check ``validate`` runs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from voicelab.artifacts import ToolCallRecord, TranscriptTurn
from voicelab.config import (
    PersonaConfig,
    Providers,
    QualityEvaluation,
    ScenarioConfig,
    SecretScrubber,
)
from voicelab.errors import ConfigError
from voicelab.scoring import (
    ConversationEvidence,
    Judge,
    JudgeVerdict,
    RedactedEvidence,
    check_plugin_judges,
    evaluate_quality,
    judges_pass,
)
from voicelab.scoring._judge_plugins import MAX_REASON_CHARS

SOURCE = "run.yaml"
SEEN: list[RedactedEvidence] = []


class Recording:
    """Keeps what it was shown; passes."""

    def __init__(self, settings: Mapping[str, object]):
        self.settings = dict(settings)

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        SEEN.append(evidence)
        return JudgeVerdict(passed=True, label="ok", score=1, reason="seen")


class Raising:
    def __init__(self, settings: Mapping[str, object]): ...

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        raise RuntimeError("the judge fell over")


class Nonsense:
    def __init__(self, settings: Mapping[str, object]): ...

    async def judge(self, evidence: RedactedEvidence) -> object:
        return {"passed": True}


class Verbose:
    """Quotes the product's words (and a secret) at length."""

    def __init__(self, settings: Mapping[str, object]): ...

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        return JudgeVerdict(passed=False, label="fail",
                            reason="token sk-live-123456 " + "x" * (3 * MAX_REASON_CHARS))


class NeedsLimit:
    def __init__(self, settings: Mapping[str, object]):
        if "limit" not in settings:
            raise KeyError("limit")

    async def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:
        return JudgeVerdict(passed=True)


class NotAJudge:
    def judge(self, evidence: RedactedEvidence) -> JudgeVerdict:  # not async
        return JudgeVerdict(passed=True)


def target(cls: type) -> str:
    return f"{__name__}:{cls.__name__}"


def evidence() -> ConversationEvidence:
    turns = [TranscriptTurn(turn_id="turn-000", index=0, role="assistant", text="Hello, how can I help?"),
             TranscriptTurn(turn_id="turn-001", index=1, role="user", text="My account is 99887766, book it"),
             TranscriptTurn(turn_id="turn-002", index=2, role="assistant",
                            text="Booked on account 99887766. A refund is on its way.")]
    call = ToolCallRecord(call_id="c1", name="book", arguments={"account": "99887766"},
                          has_result=True, result={"ok": True})
    return ConversationEvidence(
        transcript=turns, tool_calls=[call],
        scenario=ScenarioConfig.model_validate({"id": "booking", "description": "book"}),
        persona=PersonaConfig.model_validate({"name": "Sam"}))


def quality(*judges: dict[str, object]) -> QualityEvaluation:
    return QualityEvaluation.model_validate({
        "judges": list(judges), "redaction": {"sensitive_fields": ["account"]}})


def judged(*judges: dict[str, object]) -> list:
    return asyncio.run(evaluate_quality(
        quality(*judges), Providers(), evidence(),
        scrubber=SecretScrubber(secret_values=["sk-live-123456"]), environ={}))


def test_the_keywords_judge_passes_and_fails_on_the_assistants_words_without_a_provider():
    results = judged(
        {"name": "booked", "judge": "keywords", "settings": {"require": [r"\bbooked\b"]}},
        {"name": "no_refund", "judge": "keywords", "is_critical": True,
         "settings": {"forbid": ["refund"], "require": ["hello"]}},
        {"name": "user_said", "judge": "keywords", "settings": {"require": ["book it"],
                                                               "speaker": "user"}})
    assert [(r.name, r.kind, r.status) for r in results] == [
        ("booked", "plugin", "passed"), ("no_refund", "plugin", "failed"),
        ("user_said", "plugin", "passed")]
    refused = results[1]
    assert refused.critical and refused.score == 0.5 and refused.label == "fail"
    assert refused.rationale == "forbidden but said: refund"
    assert not judges_pass(results)


def test_a_judge_receives_the_redacted_evidence_and_records_it_as_sent():
    SEEN.clear()
    [result] = judged({"name": "sees", "judge": target(Recording)})
    assert result.status == "passed" and result.score == 1.0 and result.rationale == "seen"
    [shown] = SEEN
    assert "99887766" not in str(shown.as_dict())
    assert "Booked on account [REDACTED]." in shown.transcript[2]["text"]
    assert result.sent == shown.as_dict()


def test_a_raising_or_nonsense_judge_is_an_error_result_and_a_critical_one_fails_the_trial():
    raised, nonsense = judged({"name": "raises", "judge": target(Raising), "is_critical": True},
                              {"name": "nonsense", "judge": target(Nonsense)})
    assert raised.status == "error" and not raised.passed and raised.critical
    assert raised.error == "RuntimeError: the judge fell over"
    assert nonsense.status == "error" and "dict, not a JudgeVerdict" in (nonsense.error or "")
    assert not judges_pass([raised, nonsense])
    assert judges_pass([nonsense])  # an advisory judge never gates


def test_what_a_judge_writes_is_scrubbed_and_bounded():
    [result] = judged({"name": "verbose", "judge": target(Verbose)})
    assert result.status == "failed"
    assert "sk-live-123456" not in (result.rationale or "")
    assert len(result.rationale or "") < MAX_REASON_CHARS + 40
    assert (result.rationale or "").endswith("characters]")


def test_an_unresolvable_judge_at_run_time_errs_instead_of_crashing():
    [result] = judged({"name": "gone", "judge": "no_such_module_here:Judge"})
    assert result.status == "error" and "cannot import" in (result.error or "")


@pytest.mark.parametrize(("judge", "settings", "key", "says"), [
    ("nothing_registered_by_this_name", {}, "quality_evaluation.judges[0].judge",
     "unknown judge 'nothing_registered_by_this_name'; built-in: keywords"),
    (target(NotAJudge), {}, "quality_evaluation.judges[0].judge", "missing 'async def judge"),
    ("keywords", {"requires": ["x"]}, "quality_evaluation.judges[0].settings.requires",
     "did you mean 'require'?"),
    ("keywords", {}, "quality_evaluation.judges[0].settings", "at least one pattern"),
    ("keywords", {"forbid": ["("]}, "quality_evaluation.judges[0].settings.forbid",
     "not a valid regular expression"),
    (target(NeedsLimit), {}, "quality_evaluation.judges[0].settings",
     "could not be built: KeyError"),
])
def test_validate_names_the_file_and_key_of_a_bad_judge(judge, settings, key, says):
    with pytest.raises(ConfigError) as caught:
        check_plugin_judges(quality({"name": "j", "judge": judge, "settings": settings}),
                            source=SOURCE)
    line = caught.value.one_line()
    assert line.startswith(f"{SOURCE}: {key}: ") and says in line and "\n" not in line


def test_validate_lists_the_judges_it_built():
    names = check_plugin_judges(quality(
        {"name": "a", "judge": "keywords", "is_critical": True, "settings": {"require": ["x"]}},
        {"name": "b", "judge": target(Recording)}), source=SOURCE)
    assert names == ["a (critical)", "b"]
    assert isinstance(Recording({}), Judge)


def test_judge_names_are_unique_across_custom_and_plug_in_judges():
    with pytest.raises(ValueError, match="judge names must be unique: same"):
        QualityEvaluation.model_validate({
            "custom_judges": [{"name": "same", "criteria": "c"}],
            "judges": [{"name": "same", "judge": "keywords"}]})
