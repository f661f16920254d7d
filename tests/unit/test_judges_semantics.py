"""Judge result semantics, result parsing and provider checks (no network)."""

from __future__ import annotations

import math
import sys

import pytest

from voicelab.artifacts._models import JudgeResult
from voicelab.config import CustomJudge, Providers
from voicelab.errors import ConfigError, MissingDependencyError
from voicelab.providers import (
    LLMProvider,
    check_llm_provider,
    default_credential,
    import_openai,
    parse_json_object,
    resolve_llm_provider,
)
from voicelab.scoring._azure_evaluators import exchanges, interpret
from voicelab.scoring._judges import label_result
from voicelab.scoring._label_grader import read_grader_row
from voicelab.scoring._quality import critical_judge_failures, judges_pass
from voicelab.scoring._redaction import RedactedEvidence

PIP_LINE = "pip install 'voicelab[azure]'"


def _result(name: str, status: str, critical: bool) -> JudgeResult:
    return JudgeResult(name=name, kind="custom_judge", critical=critical, status=status,
                       passed=status == "passed")


def test_advisory_results_never_gate_and_critical_failures_or_errors_do():
    advisory_bad = [_result("a", "failed", False), _result("b", "error", False)]
    assert judges_pass(advisory_bad)
    assert judges_pass([*advisory_bad, _result("c", "passed", True)])
    failed = _result("c", "failed", True)
    errored = _result("d", "error", True)
    assert critical_judge_failures([*advisory_bad, failed, errored]) == [failed, errored]
    assert not judges_pass([errored])


def test_label_outside_the_judges_labels_is_an_error_not_a_pass():
    judge = CustomJudge(name="j", criteria="c", is_critical=True)
    ok = label_result(judge, label="pass", rationale="r", model="m", model_version="v", sent={})
    assert (ok.status, ok.passed, ok.score) == ("passed", True, 1.0)
    bad = label_result(judge, label="PASS!", rationale=None, model="m", model_version=None,
                       sent={"x": 1})
    assert (bad.status, bad.passed, bad.critical) == ("error", False, True)
    assert "not one of" in bad.error and bad.sent == {"x": 1}
    graded = CustomJudge(name="g", criteria="c", labels=["good", "meh", "bad"],
                         passing_labels=["good", "meh"])
    assert label_result(graded, label="meh", rationale=None, model="m", model_version=None,
                        sent=None).passed


def test_interpret_azure_results():
    found = interpret("coherence", {"coherence": 4.0, "coherence_reason": "ok",
                                    "coherence_properties": {"model": "gpt-x-2024"}},
                      threshold=3.0)
    assert found == {"score": 4.0, "passed": True, "rationale": "ok",
                     "model_version": "gpt-x-2024"}
    assert not interpret("groundedness", {"groundedness": 3.0}, threshold=4.0)["passed"]
    with pytest.raises(ValueError, match="no usable score"):
        interpret("coherence", {"coherence": math.nan}, threshold=3.0)
    with pytest.raises(ValueError, match="not applied"):
        interpret("task_adherence", {"task_adherence": 1.0,
                                     "task_adherence_status": "skipped"}, threshold=1.0)
    with pytest.raises(ValueError, match="no numeric score"):
        interpret("coherence", {"coherence_reason": "?"}, threshold=3.0)


def test_read_grader_row_takes_label_and_rationale_from_the_sample():
    row = {"outputs.j.passed": False, "outputs.j.score": 0.0,
           "outputs.j.sample": {"model": "gpt-4o-2024", "output": [{
               "role": "assistant",
               "content": '{"steps": [{"description": "no save call", "conclusion": "fail"}], '
                          '"result": "fail"}'}]}}
    assert read_grader_row("j", row) == {"label": "fail", "passed": False, "score": 0.0,
                                         "rationale": "no save call",
                                         "model_version": "gpt-4o-2024"}
    with pytest.raises(ValueError, match="no result"):
        read_grader_row("j", {"outputs.j.passed": float("nan")})


def test_exchanges_pair_user_with_assistant():
    evidence = RedactedEvidence(scenario={"id": "s", "description": ""}, persona={},
                                tool_calls=[], transcript=[
        {"index": 0, "role": "assistant", "text": "Hi."},
        {"index": 1, "role": "assistant", "text": "How can I help?"},
        {"index": 2, "role": "user", "text": "Remind me."},
        {"index": 3, "role": "user", "text": ""},
        {"index": 4, "role": "assistant", "text": "Done."}])
    assert [(m["role"], m["content"]) for m in exchanges(evidence)] == [
        ("user", "[the call connects; the assistant speaks first]"),
        ("assistant", "Hi. How can I help?"), ("user", "Remind me."), ("assistant", "Done.")]


def test_parse_json_object_from_text():
    assert parse_json_object('{"a": 1}') == {"a": 1}
    assert parse_json_object('Sure!\n```json\n{"a": 2}\n```') == {"a": 2}
    assert parse_json_object('label: {"a": 3} done') == {"a": 3}
    assert parse_json_object("[1, 2]") is None and parse_json_object("nope") is None


def test_provider_resolution_and_environment_fallbacks():
    providers = Providers.model_validate({
        "azure_openai": {"endpoint": "https://x.openai.azure.com", "model": "dep",
                         "auth": "api_key"},
        "openai": {"model": "llama", "base_url": "http://127.0.0.1:9/v1"}})
    azure = resolve_llm_provider(providers, environ={"AZURE_OPENAI_API_KEY": "k-env-1"})
    assert (azure.kind, azure.model, azure.api_key) == ("azure_openai", "dep", "k-env-1")
    assert "k-env-1" not in repr(azure) and "api_key" not in azure.describe()
    generic = resolve_llm_provider(providers, preferred="openai", environ={})
    assert (generic.kind, generic.base_url, generic.api_key) == (
        "openai", "http://127.0.0.1:9/v1", None)
    with pytest.raises(ConfigError, match="providers.voice_live|unknown provider"):
        resolve_llm_provider(providers, preferred="voice_live")
    with pytest.raises(ConfigError, match="not configured"):
        resolve_llm_provider(Providers(), preferred="openai", key="persona_settings.provider")
    with pytest.raises(ConfigError, match="configure providers.azure_openai"):
        resolve_llm_provider(Providers())


def test_missing_credentials_are_targeted_config_errors():
    with pytest.raises(ConfigError) as caught:
        check_llm_provider(LLMProvider("azure_openai", "dep", endpoint="https://x",
                                       auth="api_key"), purpose="LLM judges")
    assert caught.value.key == "providers.azure_openai.api_key"
    assert "AZURE_OPENAI_API_KEY" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        check_llm_provider(LLMProvider("openai", "m"), purpose="LLM judges")
    assert caught.value.key == "providers.openai.api_key"
    check_llm_provider(LLMProvider("openai", "m", api_key="k"), purpose="LLM judges")


def test_missing_packages_name_the_exact_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError) as caught:
        check_llm_provider(LLMProvider("openai", "m", api_key="k"), purpose="LLM judges")
    assert str(caught.value) == f"providers.openai: LLM judges needs the 'openai' package: {PIP_LINE}"
    with pytest.raises(MissingDependencyError, match="'openai' package") as caught:
        import_openai("persona_mode 'synthesizer'")
    assert str(caught.value).endswith(PIP_LINE)
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    with pytest.raises(MissingDependencyError, match="azure-identity") as caught:
        default_credential("LLM judges")
    assert str(caught.value).endswith(PIP_LINE)
    monkeypatch.delitem(sys.modules, "openai")
    monkeypatch.setitem(sys.modules, "azure.ai.evaluation", None)
    with pytest.raises(MissingDependencyError, match="'azure-ai-evaluation' package"):
        check_llm_provider(LLMProvider("openai", "m", api_key="k"), purpose="LLM judges",
                           modules=(("azure.ai.evaluation", "azure-ai-evaluation"),))
