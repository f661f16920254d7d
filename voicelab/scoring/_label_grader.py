"""Custom binary judges through the Azure OpenAI label grader.

``azure.ai.evaluation.AzureOpenAILabelGrader`` runs only inside ``evaluate()``, which drives
the OpenAI Evals API of the Azure OpenAI resource: ``POST /openai/evals`` (the grader as a
``label_model`` testing criterion), ``POST /openai/evals/{id}/runs`` (the judged item inline as
JSONL file content), ``GET .../runs/{run}`` polled until the run concludes, then
``GET .../runs/{run}/output_items``. ``evaluate()`` is synchronous and sleeps ~4.5 s before its
first poll, so a label-grader judge takes at least that long; it runs in a daemon thread with
its data file in a temporary directory that is removed afterwards, and no output file, tracing
or Azure AI project logging is requested.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifacts import JudgeResult
from ..config import CustomJudge
from ..cost import chat_usage
from ..providers import LLMProvider, parse_json_object
from ._evidence import RedactedEvidence

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

from ._judges import (
    ITEM_TEMPLATE,
    PreparedJudge,
    judge_item,
    label_instructions,
    label_result,
    run_in_daemon_thread,
)


def grader_input(judge: CustomJudge) -> list[dict[str, str]]:
    return [{"role": "developer", "content": label_instructions(judge, json_answer=False)},
            {"role": "user", "content": ITEM_TEMPLATE}]


def read_grader_row(name: str, row: dict[str, object]) -> dict[str, Any]:
    """label/passed/score/rationale/model_version from one ``evaluate()`` row."""
    prefix = f"outputs.{name}."
    passed = row.get(prefix + "passed")
    if not isinstance(passed, bool):
        raise ValueError(f"the label grader returned no result for {name!r} (passed={passed!r})")
    sample = row.get(prefix + "sample")
    sample = sample if isinstance(sample, dict) else {}
    label, rationale = row.get(prefix + "label"), None
    outputs = sample.get("output") or []
    content = outputs[0].get("content") if outputs and isinstance(outputs[0], dict) else None
    answer = parse_json_object(content) if isinstance(content, str) else None
    if answer is not None:
        label = answer.get("result", answer.get("label", label))
        steps = answer.get("steps") or []
        rationale = " ".join(str(step.get("description", "")).strip() for step in steps
                             if isinstance(step, dict)).strip() or answer.get("rationale")
    elif isinstance(content, str) and content.strip():
        label = label or content.strip()
    score = row.get(prefix + "score")
    return {"label": label, "passed": passed, "rationale": rationale or None,
            "score": float(score) if isinstance(score, int | float) else None,
            "model_version": sample.get("model") or None}


def grader_spent(name: str, row: dict[str, object]) -> tuple[dict[str, Any] | None, str]:
    """The usage one ``evaluate()`` row's sample reports (None: none) and the grader's
    answer (for an estimate when it reports none)."""
    sample = row.get(f"outputs.{name}.sample")
    sample = sample if isinstance(sample, dict) else {}
    usage = sample.get("usage")
    outputs = sample.get("output") or []
    content = outputs[0].get("content") if outputs and isinstance(outputs[0], dict) else None
    return (usage if isinstance(usage, dict) else None,
            content if isinstance(content, str) else "")


def _call_evaluate(judge: CustomJudge, provider: LLMProvider, model_config: Mapping[str, object],
                   credential: TokenCredential | None, item: dict[str, str]) -> dict[str, Any]:
    from azure.ai.evaluation import AzureOpenAILabelGrader, evaluate

    grader = AzureOpenAILabelGrader(model_config=dict(model_config),  # type: ignore[arg-type]
                                    input=grader_input(judge),
                                    labels=list(judge.labels), model=provider.model,
                                    name=judge.name, passing_labels=list(judge.passing_labels),
                                    credential=credential)
    with tempfile.TemporaryDirectory(prefix="voicelab-label-grader-") as directory:
        data_path = Path(directory) / "item.jsonl"
        data_path.write_text(json.dumps(item, ensure_ascii=False) + "\n", encoding="utf-8")
        result = evaluate(data=str(data_path), evaluators={judge.name: grader},
                          evaluation_name=f"voicelab-{judge.name}")
    rows = result.get("rows") or []
    if len(rows) != 1:
        raise ValueError(f"the label grader returned {len(rows)} rows for one item")
    found = read_grader_row(judge.name, rows[0])
    found["eval_runs"] = result.get("oai_eval_run_ids")
    found["usage"], found["answer"] = grader_spent(judge.name, rows[0])
    return found


def prepare_label_grader(judge: CustomJudge, *, provider: LLMProvider,
                         model_config: Mapping[str, object], credential: TokenCredential | None,
                         evidence: RedactedEvidence) -> PreparedJudge:
    item = judge_item(evidence)
    sent = {"api": "azure.ai.evaluation.AzureOpenAILabelGrader (OpenAI Evals API)",
            **provider.describe(),
            "grader": {"name": judge.name, "labels": list(judge.labels),
                       "passing_labels": list(judge.passing_labels),
                       "input": grader_input(judge)},
            "item": item}

    async def run() -> JudgeResult:
        found = await run_in_daemon_thread(
            lambda: _call_evaluate(judge, provider, model_config, credential, item),
            name=f"voicelab-judge-{judge.name}")
        usage = chat_usage(found["usage"], component="judge", provider=provider.kind,
                           model=provider.model, purpose=judge.name, reply_text=found["answer"],
                           sent_text="".join(m["content"] for m in grader_input(judge))
                           + "".join(item.values()))
        result = label_result(judge, label=found["label"], rationale=found["rationale"],
                              model=provider.model, model_version=found["model_version"],
                              sent=sent, score=found["score"], usage=[usage])
        if result.status != "error" and result.passed != found["passed"]:
            return result.model_copy(update={
                "status": "error", "passed": False,
                "error": f"the grader's label {found['label']!r} disagrees with its passed="
                         f"{found['passed']} verdict"})
        if found.get("eval_runs"):
            result = result.model_copy(update={"eval_runs": found["eval_runs"]})
        return result

    return PreparedJudge(judge.name, "custom_judge", judge.is_critical, provider.model, sent, run,
                         provider=provider.kind)
