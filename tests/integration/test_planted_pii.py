"""Nothing private leaks: a distinct piece of personal data and a distinct secret are planted in
every position a product, a persona, a judge, the run data, an adapter setting, a launched
product and a recorded call can put text, and every file the commands write (each bundle,
evaluator.log, JUnit, the HTML report) and everything they print is scanned for them.

* A full run (``retention.transcripts: full``) is the control: each piece of personal data
  reaches some file (so the plants are where the scan looks), and no secret reaches any.
* A redacted run, its sweep, its re-scoring, its replay, its HTML report and an ingest of a
  recorded call whose transcript holds the data: no piece of personal data and no secret
  anywhere, in any encoding the secret scrubber knows.

The product is launched per trial (``python -m voicelab.doubles.product`` behind a shell that
echoes what it was given, as a careless product would), speaks a reply and a heard transcript
holding personal data, calls its tool with the run data and needs a bearer token; the judge is
the local OpenAI-compatible server, whose rationale quotes personal data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from voicelab.config._secrets import encoded_forms
from voicelab.doubles.openai import JudgePolicy, OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CALL = ROOT / "datasets" / "production-calls" / "call-01.flac"

# personal data, one per position (each distinct, so a leak names where it came from)
PERSONA_EMAIL = "persona.planted@example.com"
DATA_PHONE = "555-301-4242"
DATA_ACCOUNT = "ACCT-ZX-99182"  # a sensitive field's value: no pattern matches it
PRODUCT_EMAIL = "product.planted@example.net"
HEARD_PHONE = "+1 555 404 1177"
JUDGE_EMAIL = "judge.planted@example.org"
ERROR_PHONE = "555-909-3131"
LOG_EMAIL = "launched.planted@example.io"
CALLER_PHONE = "555-626-7070"
AGENT_EMAIL = "agent.planted@example.co"
PII = [PERSONA_EMAIL, DATA_PHONE, DATA_ACCOUNT, PRODUCT_EMAIL, HEARD_PHONE, JUDGE_EMAIL,
       ERROR_PHONE, LOG_EMAIL, CALLER_PHONE, AGENT_EMAIL]
# secrets: an interpolated access token, a header, a provider key, a launch flag, a call's words
TOKEN = "planted-bearer-token-71c2"
HEADER = "planted-header-value-0d5e"
API_KEY = "sk-planted-api-key-33a9"
FLAG = "planted-flag-secret-b81f"
SECRETS = [TOKEN, HEADER, API_KEY, FLAG]

ENVIRONMENT = {"PLANTED_TOKEN": TOKEN, "PLANTED_API_KEY": API_KEY}


def _forms(secret: str) -> set[str]:
    return encoded_forms(secret)


def _texts(*folders: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for folder in folders:
        paths = [folder] if folder.is_file() else folder.rglob("*")
        for path in paths:
            if path.is_file() and not path.is_symlink():
                found[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return found


def _hits(texts: dict[str, str], needles: list[str], *, encoded: bool) -> list[tuple[str, str]]:
    hits = []
    for where, text in texts.items():
        for needle in needles:
            forms = _forms(needle) if encoded else {needle}
            if any(form in text for form in forms):
                hits.append((Path(where).name if "/" in where else where, needle))
    return hits


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **ENVIRONMENT})


def _bundle(root: Path) -> Path:
    return next(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                and not p.name.startswith("."))


@pytest.fixture(scope="module")
def judge():
    policy = JudgePolicy(default_label="pass", rationale=f"the caller wrote from {JUDGE_EMAIL}")
    with OpenAIServer(policy, api_key=API_KEY, model_version="judge-1") as server:
        yield server


def _suite(folder: Path, judge: OpenAIServer, *, transcripts: str) -> Path:
    folder.mkdir()
    for path in EXAMPLES.glob("*workload-neutral-voice.yaml"):
        shutil.copy(path, folder / path.name)
    script = yaml.safe_load((folder / "script-workload-neutral-voice.yaml").read_text())
    script["turns"][0]["response"] += f" Write to {PERSONA_EMAIL}."
    (folder / "script-workload-neutral-voice.yaml").write_text(yaml.safe_dump(script))
    data = yaml.safe_load((folder / "data-workload-neutral-voice.yaml").read_text())
    data["context"]["requested_reminder"] = f"Call {DATA_PHONE} at 16:00"
    data["context"]["customer_account"] = DATA_ACCOUNT
    (folder / "data-workload-neutral-voice.yaml").write_text(yaml.safe_dump(data))
    product = {"reply_text": f"I recorded your daily plan and saved the reminder; a copy goes "
                             f"to {PRODUCT_EMAIL}.", "input_transcript": f"call {HEARD_PHONE}",
               "access_token": TOKEN}
    echo = f'echo "starting for {LOG_EMAIL} with $*"; exec "$0" -m voicelab.doubles.product ' \
           f'--port "$1" --settings "$2"'
    run = yaml.safe_load((folder / "run-workload-neutral-voice.yaml").read_text())
    run.update({
        "endpoint": {
            "adapter": "websocket",
            "settings": {"uri": "ws://127.0.0.1:{port}/", "access_token": "${PLANTED_TOKEN}",
                         "headers": {"X-Session-Note": HEADER}},
            "launch": {"command": ["/bin/sh", "-c", echo, sys.executable, "{port}",
                                   json.dumps(product), "--api-key", FLAG],
                       "ready_pattern": '"uri"', "ready_timeout_seconds": 60}},
        "providers": {"openai": {"base_url": judge.base_url, "api_key": "${PLANTED_API_KEY}",
                                 "model": "judge"}},
        "quality_evaluation": {
            "redaction": {"sensitive_fields": ["customer_account"]},
            "custom_judges": [{"name": "polite", "criteria": "The assistant is polite."}]},
        "retention": {"transcripts": transcripts}})
    (folder / "run-workload-neutral-voice.yaml").write_text(yaml.safe_dump(run))
    # the same product in-process (adapter: fake), failing its reply with an error that
    # quotes personal data
    failing = {**run, "endpoint": {"adapter": "fake", "settings": {
        **product, "error_on_response": 1, "error_message": f"no account for {ERROR_PHONE}"}},
        "quality_evaluation": {"redaction": {"sensitive_fields": ["customer_account"]}}}
    (folder / "run-failing.yaml").write_text(yaml.safe_dump(failing))
    (folder / "suite.yaml").write_text(yaml.safe_dump({
        "name": "planted", "base": "run-failing.yaml", "environments": ["quiet"],
        "personas": [{"persona": "persona-workload-neutral-voice.yaml",
                      "script": "script-workload-neutral-voice.yaml",
                      "data": "data-workload-neutral-voice.yaml"}]}))
    return folder


def _call(folder: Path) -> Path:
    """A recorded call whose transcript holds personal data and a secret."""
    call = folder / "call-planted.flac"
    shutil.copy(CALL, call)
    transcript = json.loads(CALL.with_suffix(".transcript.json").read_text())
    for segment in transcript["segments"]:
        if segment["speaker"] == "user":
            segment["text"] += f" My number is {CALLER_PHONE}."
        else:
            segment["text"] += f" I'll mail {AGENT_EMAIL}, code {TOKEN}."
    call.with_suffix(".transcript.json").write_text(json.dumps(transcript))
    return call


@pytest.fixture(scope="module")
def full(tmp_path_factory, judge):
    """The control: the same plants, the words kept."""
    base = tmp_path_factory.mktemp("full")
    suite = _suite(base / "suite", judge, transcripts="full")
    outputs = {}
    for name, run_file in (("run", "run-workload-neutral-voice.yaml"),
                           ("failing", "run-failing.yaml")):
        done = _cli("run", str(suite / run_file), "--trials", "1", "--artifacts-dir",
                    str(base / name), cwd=base)
        outputs[name] = done
    ingested = _cli("ingest", str(_call(suite)), "--artifacts-dir", str(base / "ingest"),
                    "--run-file", str(suite / "run-failing.yaml"), cwd=base)
    return base, outputs, ingested


def test_each_plant_reaches_a_file_of_a_full_run_and_no_secret_reaches_any(full):
    base, outputs, ingested = full
    assert outputs["run"].returncode == 3, outputs["run"].stderr  # outcome verdicts: no probe
    assert outputs["failing"].returncode == 4, outputs["failing"].stderr
    assert ingested.returncode in (0, 3), ingested.stderr
    texts = _texts(base / "run", base / "failing", base / "ingest")
    reached = {needle for _, needle in _hits(texts, PII, encoded=False)}
    assert reached == set(PII), f"plants that reached no file: {set(PII) - reached}"
    printed = {f"{name} {stream}": getattr(done, stream)
               for name, done in (*outputs.items(), ("ingest", ingested))
               for stream in ("stdout", "stderr")}
    assert not _hits({**texts, **printed}, SECRETS + [TOKEN], encoded=True)


@pytest.fixture(scope="module")
def redacted(tmp_path_factory, judge):
    base = tmp_path_factory.mktemp("redacted")
    suite = _suite(base / "suite", judge, transcripts="redacted")
    printed: dict[str, str] = {}

    def cli(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        done = _cli(*args, cwd=base)
        printed[f"{name} stdout"], printed[f"{name} stderr"] = done.stdout, done.stderr
        return done

    codes = {
        "run": cli("run", "run", str(suite / "run-workload-neutral-voice.yaml"), "--trials", "1",
                   "--artifacts-dir", str(base / "run"), "--junit", str(base / "run.xml")),
        "failing": cli("failing", "run", str(suite / "run-failing.yaml"), "--trials", "1",
                       "--artifacts-dir", str(base / "failing"), "--junit",
                       str(base / "failing.xml")),
        "sweep": cli("sweep", "sweep", str(suite / "suite.yaml"), "--trials", "1",
                     "--artifacts-dir", str(base / "sweep"), "--junit", str(base / "sweep.xml")),
        "ingest": cli("ingest", "ingest", str(_call(suite)), "--artifacts-dir",
                      str(base / "ingest"), "--run-file", str(suite / "run-failing.yaml"),
                      "--junit", str(base / "ingest.xml")),
    }
    run_bundle = _bundle(base / "run")
    codes["rescore"] = cli("rescore", "rescore", str(run_bundle), "--output",
                           str(base / "rescored")).returncode
    codes["replay"] = cli("replay", "replay", str(_bundle(base / "failing")),
                          "--artifacts-dir", str(base / "replay"),
                          "--set", "endpoint.settings.access_token=${PLANTED_TOKEN}",
                          "--set", "providers.openai.api_key=${PLANTED_API_KEY}").returncode
    codes["report"] = cli("report", "report", str(run_bundle), str(_bundle(base / "failing")),
                          "--output", str(base / "report.html")).returncode
    codes = {k: v if isinstance(v, int) else v.returncode for k, v in codes.items()}
    return base, codes, printed


def test_a_redacted_bundle_holds_no_personal_data_and_no_secret_anywhere(redacted):
    base, codes, printed = redacted
    assert codes == {"run": 3, "failing": 4, "sweep": 4, "ingest": codes["ingest"],
                     "rescore": 3, "replay": 4, "report": 0}, printed
    assert codes["ingest"] in (0, 3), printed["ingest stderr"]
    # every bundle, evaluator.log, JUnit files, the HTML report (not the inputs, in suite/)
    texts = {where: text for where, text in _texts(base).items()
             if not Path(where).is_relative_to(base / "suite")}
    assert any(name.endswith("report.html") for name in texts)
    assert sum(name.endswith("evaluator.log") for name in texts) >= 5
    assert not _hits({**texts, **printed}, PII, encoded=False)
    assert not _hits({**texts, **printed}, SECRETS, encoded=True)
    # the verdicts were decided on the full words: the judge ran, the topics were heard
    report = json.loads((_bundle(base / "run") / "trial-001" / "trial-report.json").read_text())
    assert [j["status"] for j in report["judges"]] == ["passed"]
    assert next(v for v in report["verdicts"] if v["name"] == "expected_topics")["passed"]
    assert "[REDACTED]" in report["judges"][0]["rationale"]


def test_a_redacted_bundle_is_its_owners_alone(redacted):
    base, _, _ = redacted
    for root in ("run", "failing", "sweep", "ingest", "rescored", "replay"):
        bundle = _bundle(base / root)
        for path in [bundle, *bundle.rglob("*")]:
            if path.is_symlink():
                continue
            mode = path.stat().st_mode & 0o777
            expected = 0o700 if path.is_dir() else 0o600
            assert mode == expected, (str(path), oct(mode))
