"""Runs that launch the product: a process per trial or one per run, its port filled in, its
output kept as product.log, and a product that never gets ready failing with exit 4."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import voicelab
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"


def launched(tmp_path: Path, *, per: str, ready: str = '"uri"') -> list[str]:
    database = tmp_path / "product.sqlite3"
    command = [sys.executable, "-m", "voicelab.doubles.product", "--port", "{port}",
               "--settings", json.dumps({"database_path": str(database)})]
    return [
        "endpoint.adapter=websocket",
        "endpoint.settings={uri: 'ws://127.0.0.1:{port}/'}",
        f"endpoint.launch={{command: {json.dumps(command)}, ready_pattern: {json.dumps(ready)}, "
        f"per: {per}, ready_timeout_seconds: 20}}",
        f"outcome_probe={{probe: fake, settings: {{database_path: '{database}'}}}}",
    ]


def test_a_product_launched_for_each_trial(tmp_path):
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path / "runs",
        overrides=launched(tmp_path, per="trial")))
    assert outcome.exit_code == 0, [t.report.failures for t in outcome.trials]
    logs = [(outcome.bundle_path / f"trial-00{i}" / "product.log").read_text() for i in (1, 2)]
    for log in logs:
        assert '"uri": "ws://127.0.0.1:' in log and "stdout" in log
    ports = {log.split('"port": ')[1].split(",")[0] for log in logs}
    assert len(ports) == 2  # a fresh process (and port) per trial
    report = read_json(outcome.bundle_path / "trial-001" / "trial-report.json")
    assert "product.log" in report["files"]
    assert report["outcome"]["follow_up_created"] is True  # probed before the product stopped


def test_one_product_for_the_whole_run(tmp_path):
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=2,
        artifacts_dir=tmp_path / "runs",
        overrides=launched(tmp_path, per="run")))
    assert outcome.exit_code == 0, [t.report.failures for t in outcome.trials]
    log = (outcome.bundle_path / "product.log").read_text()
    assert log.count('"uri"') == 1
    assert not (outcome.bundle_path / "trial-001" / "product.log").exists()


def test_a_product_that_never_gets_ready_fails_with_its_log_kept(tmp_path):
    process = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--artifacts-dir",
         str(tmp_path / "runs"), *[a for o in launched(tmp_path, per="trial",
                                                         ready="never printed")
                                     for a in ("--set", o)],
         # (long enough for the product to start and print on a busy machine)
         "--set", "endpoint.launch.ready_timeout_seconds=8"],
        capture_output=True, text=True, timeout=120)
    assert process.returncode == 4, process.stdout + process.stderr
    assert "Traceback" not in process.stderr
    bundle = next(p.parent.resolve() for p in (tmp_path / "runs").glob("*/run-report.json"))
    report = read_json(bundle / "trial-001" / "trial-report.json")
    assert report["failures"][0]["code"] == "launch_timeout"
    log = (bundle / "trial-001" / "product.log").read_text()
    assert '"uri"' in log  # what the product did print is kept


def test_a_product_that_logs_ready_to_stderr_before_binding_is_tested(tmp_path):
    overrides = launched(tmp_path, per="trial", ready="Uvicorn running on")
    overrides[2] = overrides[2].replace('"--settings"', '"--announce-early", "1.0", "--settings"')
    outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
        trials=1,
        artifacts_dir=tmp_path / "runs",
        overrides=overrides))
    assert outcome.exit_code == 0, [t.report.failures for t in outcome.trials]
    log = (outcome.bundle_path / "trial-001" / "product.log").read_text()
    said_ready = log.index("stderr] INFO:     Uvicorn running on")
    assert log.index("accepts connections") > said_ready  # it was waited for, not refused


#: the fake product behind a shell that first starts two processes that leave its group: one in
#: a session of its own, one in a group of its own (they report their pids on stdout)
ESCAPING_WRAPPER = """
setsid sleep 300 &
echo "escaped session $!"
"$1" -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' &
echo "escaped group $!"
shift
exec "$@"
"""


def test_a_product_whose_children_leave_its_group_leaves_nothing_running(tmp_path):
    overrides = launched(tmp_path, per="trial")
    command = json.loads(overrides[2].split("command: ")[1].split(", ready_pattern")[0])
    wrapped = ["sh", "-c", ESCAPING_WRAPPER, "sh", sys.executable, *command]
    overrides[2] = overrides[2].replace(json.dumps(command), json.dumps(wrapped))
    pids: list[int] = []
    try:
        outcome = voicelab.run(EXAMPLE, voicelab.RunOptions(
            trials=1,
            artifacts_dir=tmp_path / "runs",
            overrides=overrides))
        assert outcome.exit_code == 0, [t.report.failures for t in outcome.trials]
        log = (outcome.bundle_path / "trial-001" / "product.log").read_text()
        pids = [int(line.split()[-1]) for line in log.splitlines() if "] escaped " in line]
        assert len(pids) == 2
        assert not [pid for pid in pids if _running(pid)]
    finally:  # never leave them behind on a failure
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """A process with that pid runs (a zombie waiting for init to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")
