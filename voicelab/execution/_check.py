"""``voice-evaluator check``: does a product's endpoint do what its adapter expects, before any
suite runs against it?

The check is one short call through the real adapter (the same runner, recording and metrics
as a run): the product may open, the caller says one sentence, then speaks over the product's
next reply (a barge-in, where the adapter can interrupt), then says goodbye; the line is live
and paced like a call. What the product did is then read from the recording, point by point:

* ``connects``: the connection and the wire's handshake succeeded;
* ``answers``: product audio came back after the caller's turn;
* ``ends_turn``: the product said when its reply was done (``client``: ``response.done`` or the
  wire's equivalent) or fell silent so the caller could speak again (``server_vad``);
* ``transcripts``: it said what it said, when its adapter carries transcripts;
* ``barge_in``: it stopped speaking when the caller spoke over it, when the adapter can
  interrupt;
* ``closes_cleanly``: no product error and no dropped connection during the call.

Each failed point says what to change. :attr:`EndpointCheck.exit_code`: 0 everything passed,
3 a point failed, 4 it could not connect.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .._exit_codes import check_exit_code
from .._validate import RunPlan, validate_run
from ..artifacts import VOICE_EVENTS, ExecutionFailure, TurnMetrics, read_voice_events
from ..config import load_run, read_yaml
from ..errors import ConfigError
from ..runner import RunOutcome, TrialResult
from ._arun import arun, run_sync
from ._options import RunOptions

#: How long the check waits for a reply before it calls the product silent.
RESPONSE_TIMEOUT_SECONDS = 8.0
#: A barge-in honoured: the product's speech stops within this of the caller's.
MAX_INTERRUPTION_STOP_MS = 1500.0

_SCENARIO = {
    "id": "endpoint-check", "description": "voice-evaluator check: one short call",
    "conversation": {"first_speaker": "auto", "first_speaker_wait_seconds": 3.0,
                     "max_turns": 4},
    "eval_spec": {"limits": {"max_turns": 4, "max_time_seconds": 90},
                  "response_timeout_seconds": RESPONSE_TIMEOUT_SECONDS,
                  "max_interruption_stop_ms": MAX_INTERRUPTION_STOP_MS},
}
_PERSONA = {"name": "check", "description": "a caller checking the line"}
_TURNS = [
    {"response": "Hello, can you hear me?"},
    {"response": "Sorry, one question.", "kind": "interruption",
     "interrupt_after_seconds": 0.6},
    {"response": "Thanks, goodbye."},
]
_BARGE_IN_TURN = "turn-002"

Status = Literal["passed", "failed", "not_applicable"]


@dataclass(frozen=True)
class CheckPoint:
    """One point of the check: what the product did, and the fix when it failed."""

    name: str
    status: Status
    found: str
    fix: str = ""


@dataclass
class EndpointCheck:
    """What :func:`acheck_endpoint` found: the points in order, and the call's bundle."""

    adapter: str
    turn_taking: str
    points: list[CheckPoint] = field(default_factory=list)
    location: str = ""

    @property
    def connected(self) -> bool:
        return any(p.name == "connects" and p.status == "passed" for p in self.points)

    @property
    def exit_code(self) -> int:
        return check_exit_code(connected=self.connected,
                               failed=any(p.status == "failed" for p in self.points))


def _write(folder: Path, name: str, document: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    return path


def _check_run(config: Path, scratch: Path, overrides: Sequence[str]) -> tuple[Path, list[str]]:
    """The run file of the check call and its overrides: the given run file with the check's
    scenario, persona and script; or, for an endpoint block, a run file around it."""
    document = read_yaml(config)
    files = {"scenario_path": _write(scratch, "scenario.yaml", _SCENARIO),
             "persona_path": _write(scratch, "persona.yaml", _PERSONA),
             "script_path": _write(scratch, "script.yaml", {"turns": _TURNS})}
    call: dict[str, Any] = {"environment_path": None, "outcome_probe": None, "quality_evaluation": None,
            "gates": [], "persona_mode": "scripted", "pace_audio": True, "trials": 1,
            "concurrency": 1}
    if isinstance(document, dict) and "scenario_path" in document:
        given = [f"{key}={json.dumps(str(path))}" for key, path in files.items()]
        given += [f"{key}={json.dumps(value)}" for key, value in call.items()]
        return config, [*given, *overrides]
    block = document.get("endpoint", document) if isinstance(document, dict) else None
    if not isinstance(block, dict) or "adapter" not in block:
        raise ConfigError("expected a run file (with scenario_path) or an endpoint block (with "
                          "adapter:, at the top or under endpoint:)", source=config)
    block = copy.deepcopy(block)
    launch = block.get("launch")
    if isinstance(launch, dict) and "cwd" not in launch:  # its command is relative to its file
        launch["cwd"] = str(config.parent)
    data = _write(scratch, "data.yaml", {"session_id": "voicelab-check"})
    run = {**{key: str(path) for key, path in files.items()}, "data_path": str(data),
           **{key: value for key, value in call.items() if value is not None},
           "speech_provider": "tone", "endpoint": block}
    return _write(scratch, "run.yaml", run), list(overrides)


async def acheck_endpoint(config: str | Path, *, overrides: Sequence[str] = (),
                          artifacts_dir: str | Path | None = None) -> EndpointCheck:
    """Check the endpoint of ``config`` (a run file, or a YAML file holding just an
    ``endpoint:`` block or its ``adapter:``/``settings:``/``launch:``) with one short call, and
    say point by point what the product did (module docstring). ``overrides`` are ``--set``
    texts (``endpoint.settings.uri=...``); the call's bundle goes under ``artifacts_dir``
    (default: a temporary folder, removed). Raises :class:`~voicelab.errors.ConfigError` for a
    configuration that cannot run."""
    config = Path(config).expanduser().resolve()
    with tempfile.TemporaryDirectory(prefix="voicelab-check-") as scratch:
        run_file, given = _check_run(config, Path(scratch), overrides)
        plan = validate_run(load_run(run_file, overrides=given))
        target = artifacts_dir if artifacts_dir is not None else Path(scratch) / "runs"
        outcome = await arun(plan, RunOptions(trials=1, artifacts_dir=target,
                                                   retry_inconclusive=0))
        return _judge(plan, outcome)


def check_endpoint(config: str | Path, *, overrides: Sequence[str] = (),
                   artifacts_dir: str | Path | None = None) -> EndpointCheck:
    """Synchronous :func:`acheck_endpoint`, for scripts."""
    found: EndpointCheck = run_sync(acheck_endpoint, config, overrides=overrides,
                                    artifacts_dir=artifacts_dir)
    return found


def _judge(plan: RunPlan, outcome: RunOutcome) -> EndpointCheck:
    """The points of the check, read from the call's recording and trial report."""
    capabilities = plan.summary.capabilities
    check = EndpointCheck(adapter=plan.summary.adapter, turn_taking=plan.turn_taking,
                          location=outcome.location)
    trial = outcome.trials[0] if outcome.trials else None
    kinds = _event_kinds(outcome, trial)
    failures = [] if trial is None else list(trial.report.failures)
    failure_text = "; ".join(f"{f.kind}: {f.message}" for f in failures)
    if "session.connected" not in kinds:
        check.points.append(CheckPoint(
            "connects", "failed", f"no connection: {failure_text or 'the call did not start'}",
            "check endpoint.settings.uri (scheme, host, port, path) and that the product "
            "listens there; with endpoint.launch, that ready_pattern matches a line it prints "
            "once it listens (its output is product.log in the bundle)"))
        return check
    check.points.append(CheckPoint("connects", "passed",
                                   "connected and completed the wire's handshake"))
    turns = {t.turn_id: t for t in (trial.turn_metrics if trial is not None else [])}
    answered = [t for t in turns.values() if t.turn_id != "turn-000"
                and t.first_audio_latency_ms is not None]
    check.points.append(_answers(plan, turns.get("turn-001")))
    check.points.append(_ends_turn(plan, kinds, answered=bool(answered)))
    check.points.append(_transcripts(plan, kinds))
    check.points.append(_barge_in(capabilities, turns, trial))
    check.points.append(_closes_cleanly(kinds, failures, failure_text, trial))
    return check


def _event_kinds(outcome: RunOutcome, trial: TrialResult | None) -> list[str]:
    """The event types the call recorded, in order (none when it wrote no events)."""
    events: list[dict[str, Any]] = []
    if trial is not None:
        events_file = outcome.bundle_path / trial.report.trial_id / VOICE_EVENTS
        if events_file.is_file():
            events = read_voice_events(events_file)
    return [str(event.get("event_type")) for event in events]


def _answers(plan: RunPlan, first: TurnMetrics | None) -> CheckPoint:
    """Did product audio come back after the caller's first turn?"""
    if first is not None and first.first_audio_latency_ms is not None:
        return CheckPoint(
            "answers", "passed", f"answered the caller's turn: first audio after "
                                 f"{first.first_audio_latency_ms:.0f} ms")
    listens = plan.turn_taking == "server_vad"
    return CheckPoint(
        "answers", "failed", f"no audio came back within {RESPONSE_TIMEOUT_SECONDS:g} s of "
                             "the caller's turn",
        "detect the end of the caller's speech on the live line (their speech, then "
        "silence) and reply with audio on the wire" if listens else
        "reply to input_audio_buffer.commit + response.create (or the wire's end of "
        "turn) with audio")


def _ends_turn(plan: RunPlan, kinds: list[str], *, answered: bool) -> CheckPoint:
    """Did the product say its reply was done, or fall silent so the caller could speak?"""
    ended = kinds.count("product.response_done")
    user_turns = kinds.count("user.turn_started")
    if plan.turn_taking == "server_vad":
        status: Status = "passed" if answered and user_turns >= 2 else "failed"
        found = (f"fell silent after its reply, so the caller spoke again ({user_turns} caller "
                 "turn(s))" if status == "passed" else "its reply never ended in silence the "
                 "caller could speak into")
        fix = "stop sending speech once a reply is said (silence frames are fine)"
    else:
        status = "passed" if ended >= 1 and answered else "failed"
        found = f"said {ended} time(s) that a reply was done" if ended else \
            "never said that a reply was done"
        fix = ("send response.done {status: completed} (the wire's end of a reply) after each "
               "reply: without it the caller waits response_timeout_seconds")
    return CheckPoint("ends_turn", status, found, "" if status == "passed" else fix)


def _transcripts(plan: RunPlan, kinds: list[str]) -> CheckPoint:
    """Did the product send transcripts of its replies, where its wire carries them?"""
    transcripts = kinds.count("product.transcript")
    if not plan.summary.capabilities.get("output_transcripts"):
        return CheckPoint(
            "transcripts", "not_applicable", f"the {plan.summary.adapter} wire carries no "
            "transcripts: the product's words are recognized from its audio "
            "(transcription.product: auto, pip install 'voicelab[speech]')")
    if transcripts:
        return CheckPoint("transcripts", "passed",
                          f"sent {transcripts} transcript(s) of its replies")
    return CheckPoint(
        "transcripts", "failed", "sent no transcript of what it said",
        "send response.output_audio_transcript.done {transcript} with each reply (the "
        "text verdicts and judges read it), or set transcription.product: asr to "
        "recognize the audio instead")


def _closes_cleanly(kinds: list[str], failures: Sequence[ExecutionFailure], failure_text: str,
                    trial: TrialResult | None) -> CheckPoint:
    """Did the call end without a product error or a dropped connection?"""
    # a silent product's timeout is the "answers" point's; a file not written is no product's
    errors = [f for f in failures if f.kind not in ("artifacts", "timeout")]
    dropped = trial is not None and trial.report.exit_reason == "connection_closed"
    if errors or dropped or "product.error" in kinds:
        said = failure_text or f"the call ended with {trial.report.exit_reason if trial else '?'}"
        return CheckPoint(
            "closes_cleanly", "failed", said,
            "keep the connection open until the caller hangs up (or end the call with the "
            "wire's completion, then close 1000); never close or error mid-reply")
    exit_reason = trial.report.exit_reason if trial is not None else "?"
    return CheckPoint("closes_cleanly", "passed",
                      f"no error, no dropped connection (ended: {exit_reason})")


def _barge_in(capabilities: dict[str, bool], turns: dict[str, Any], trial: Any) -> CheckPoint:
    if not capabilities.get("interruption"):
        return CheckPoint("barge_in", "not_applicable",
                          "the adapter cannot interrupt the product on this wire")
    verdict = next((v for v in (trial.report.verdicts if trial is not None else [])
                    if v.name == "interruption_honoured"), None)
    interrupted = [t for t in turns.values() if t.interrupted]
    if verdict is None or not interrupted:
        return CheckPoint("barge_in", "not_applicable",
                          "not tried: no reply was still playing when the caller meant to "
                          "speak over it (a reply shorter than 0.6 s)")
    stop = interrupted[0].interruption_stop_latency_ms
    if verdict.passed:
        return CheckPoint("barge_in", "passed", "stopped speaking when the caller spoke over "
                          f"it ({stop:.0f} ms)" if stop is not None else
                          "stopped speaking when the caller spoke over it")
    return CheckPoint(
        "barge_in", "failed", f"kept speaking over the caller ({verdict.why or 'not stopped'})",
        f"stop sending audio within {MAX_INTERRUPTION_STOP_MS:g} ms of a barge-in: on "
        "response.cancel (client), or when the caller speaks over you (server_vad), and say so "
        "(response.done status cancelled, Twilio clear, pipecat InterruptionFrame)")


__all__ = ["CheckPoint", "EndpointCheck", "acheck_endpoint", "check_endpoint"]
