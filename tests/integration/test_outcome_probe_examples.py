"""The outcome probes of docs/testing-your-agent.md (examples/outcome_probes.py), for real: the
fake product persists to a SQLite file; one probe queries that file, the other an HTTP API on
127.0.0.1 in front of it (a stand-in for your own service)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

import voicelab
from voicelab.analysis import load_frames
from voicelab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-own-database.yaml"
BROKEN = "endpoint.settings.claim_without_tool=true"  # says "saved", saves nothing


def _run(tmp_path: Path, *overrides: str, trials: int = 2):
    database = tmp_path / "product.sqlite3"
    loaded = voicelab.load_run(EXAMPLE, environ={"PRODUCT_DB": str(database)},
                               overrides=list(overrides))
    return asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        artifacts_dir=tmp_path / "runs")))


def _outcome_verdicts(outcome) -> dict[str, list[bool]]:
    verdicts = load_frames(outcome.bundle_path).verdicts
    names = verdicts["name"].astype(str)
    return {name: verdicts.loc[names == name, "passed"].astype(bool).tolist()
            for name in sorted(set(names)) if name.startswith("outcome_")}


def test_the_sql_probe_reads_what_the_product_persisted(tmp_path):
    saved = _run(tmp_path / "saved")
    assert _outcome_verdicts(saved) == {"outcome_follow_up_created": [True, True],
                                        "outcome_report_fields_complete": [True, True]}
    broken = _run(tmp_path / "broken", BROKEN)
    assert broken.exit_code == 3
    assert _outcome_verdicts(broken) == {"outcome_follow_up_created": [False, False],
                                         "outcome_report_fields_complete": [False, False]}
    report = broken.trials[0].report
    assert report.outcome == {"follow_up_created": False, "report_fields_complete": False}


class _SessionsApi(BaseHTTPRequestHandler):
    """GET /sessions/<id>: the session's outcome as JSON from the product's database; 404 for
    a session it never saw; 401 without the token."""

    database: Path
    token = "api-token-4711"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self._reply(401, {"error": "unauthorized"})
            return
        session_id = unquote(self.path.removeprefix("/sessions/"))
        db = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)
        try:
            known = db.execute("SELECT 1 FROM sessions WHERE session_id = ?",
                               (session_id,)).fetchone()
            reminder = db.execute("SELECT time FROM reminders WHERE session_id = ? ORDER BY id "
                                  "DESC LIMIT 1", (session_id,)).fetchone()
        finally:
            db.close()
        if known is None:
            self._reply(404, {"error": "no such session"})
            return
        self._reply(200, {"follow_up_created": reminder is not None,
                          "report_fields_complete": reminder is not None,
                          "reminder_time": reminder[0] if reminder else None})

    def _reply(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def api(tmp_path):
    handler = type("Api", (_SessionsApi,), {"database": tmp_path / "product.sqlite3"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _http_probe(url: str, token: str, *, path: str = "/sessions/{session_id}") -> list[str]:
    return ["outcome_probe.probe=outcome_probes.HttpOutcomeProbe",
            f"outcome_probe.settings={{url: '{url}{path}', "
            f"headers: {{Authorization: 'Bearer {token}'}}, timeout_seconds: 5}}"]


def test_the_http_probe_reads_the_outcome_from_an_api(tmp_path, api):
    saved = _run(tmp_path, *_http_probe(api, _SessionsApi.token))
    assert saved.exit_code == 0, [t.report.verdicts for t in saved.trials]
    assert _outcome_verdicts(saved) == {"outcome_follow_up_created": [True, True],
                                        "outcome_report_fields_complete": [True, True]}
    assert saved.trials[0].report.outcome["reminder_time"] == "16:00"
    # the token given in the run is a secret: no artifact holds it
    for path in saved.bundle_path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".md", ".log"):
            assert _SessionsApi.token not in path.read_text(errors="replace"), path


def test_the_http_probe_without_a_record_or_with_an_error_status(tmp_path, api):
    unknown = _run(tmp_path, *_http_probe(api, _SessionsApi.token,
                                          path="/sessions/not-{session_id}"), trials=1)
    report = unknown.trials[0].report
    assert not report.passed and report.outcome is None  # a 404: the API has no record
    assert {v.name for v in report.verdicts if not v.passed} >= {"outcome_follow_up_created"}
    refused = _run(tmp_path / "refused", *_http_probe(api, "wrong-token"), trials=1)
    report = refused.trials[0].report
    assert not report.passed and report.outcome_status == "error"
    assert "401" in (report.outcome_error or "")


# --- a settings mistake is the run file's, found by validate ---------------------------------

def _validate(*overrides: str) -> subprocess.CompletedProcess:
    arguments = [argument for override in overrides for argument in ("--set", override)]
    return subprocess.run([sys.executable, "-m", "voicelab", "validate", str(EXAMPLE),
                           *arguments], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PRODUCT_DB": "/nonexistent/product.sqlite3"})


@pytest.mark.parametrize(("settings", "key", "words"), [
    # a typo: the probe's own model names the unknown setting and the allowed ones
    ("{databse: /tmp/x.sqlite3, query: 'SELECT 1 WHERE :session_id'}",
     "outcome_probe.settings.databse", "unknown setting (did you mean 'database'? allowed: booleans, database, query)"),
    ("{database: /tmp/x.sqlite3, query: 'SELECT 1'}",
     "outcome_probe.settings.query", "must use the parameter :session_id"),
])
def test_a_probe_settings_mistake_is_exit_2_at_validate(settings: str, key: str,
                                                         words: str) -> None:
    result = _validate(f"outcome_probe.settings={settings}")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "run-own-database.yaml" in line and key in line and words in line, line


def test_the_built_in_probe_and_a_probe_without_a_model_are_checked_too(tmp_path: Path) -> None:
    from voicelab._validate import validate_run

    built_in = voicelab.load_run(EXAMPLE, environ={}, overrides=[
        "outcome_probe={probe: fake, settings: {database: /tmp/x.sqlite3}}"])
    with pytest.raises(ConfigError) as caught:
        validate_run(built_in)
    assert caught.value.key == "outcome_probe.settings.database"  # unknown: database_path
    # a probe class with no settings_model and no check_settings is built once at validation
    (tmp_path / "bare_probe.py").write_text(
        "class BareProbe:\n"
        "    def __init__(self, settings):\n"
        "        self.database = settings['database']\n"
        "    async def probe(self, context):\n"
        "        return {}\n")
    shutil.copytree(EXAMPLE.parent, tmp_path / "suite", ignore=shutil.ignore_patterns("*.wav"))
    shutil.copy(tmp_path / "bare_probe.py", tmp_path / "suite" / "bare_probe.py")
    bare = voicelab.load_run(tmp_path / "suite" / EXAMPLE.name, environ={}, overrides=[
        "outcome_probe={probe: bare_probe.BareProbe, settings: {databse: /tmp/x}}"])
    with pytest.raises(ConfigError) as caught:
        validate_run(bare)
    assert caught.value.key == "outcome_probe.settings"
    assert "missing setting 'database'" in caught.value.message
