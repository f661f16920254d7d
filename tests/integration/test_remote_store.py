"""Runs whose artifacts live in a store: a real S3-compatible server (moto's server mode on
127.0.0.1, started here) reached through s3fs, and fsspec's in-memory store.

The CLI reaches the server the way a user's shell would: AWS credentials in the environment
and the endpoint in ``FSSPEC_S3_ENDPOINT_URL`` (fsspec's configuration); in-process readers
get the same through ``fsspec.config.conf``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fsspec
import pytest

import voicelab
from voicelab.analysis import load_frames, read_trial_audio
from voicelab.artifacts import TRIAL_FILES

pytest.importorskip("s3fs", reason="the s3:// store tests need s3fs (pip install 'voicelab[s3]')")
pytest.importorskip("moto.server", reason="the S3 server double is moto's (pip install "
                                          "'moto[server]')")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
SWEEP = ROOT / "examples" / "sweep-workload-neutral.yaml"
BUCKET = "voicelab-runs"  # the bucket of the s3 fixture (conftest.py)
LATENCY = "endpoint.settings.reply_latency_ms=700"  # each trial takes ~1.5 s: one is in flight


def cli(s3: Any, *args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voicelab", *args], capture_output=True,
                          text=True, timeout=timeout, env=s3.env, cwd=cwd)


def test_a_run_to_s3_publishes_every_trial_and_reads_back(s3, tmp_path):
    result = cli(s3, "run", str(EXAMPLE), "--trials", "2", "--concurrency", "2",
                 "--artifacts-dir", f"s3://{BUCKET}/runs", "--junit", "junit.xml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]  # no local "s3:" folder
    s3.fs.invalidate_cache()
    run_id = s3.fs.cat_file(f"{BUCKET}/runs/LATEST").decode().strip()
    assert f"bundle: s3://{BUCKET}/runs/{run_id}" in result.stdout
    for trial in ("trial-001", "trial-002"):
        assert s3.names(f"runs/{run_id}/{trial}") == set(TRIAL_FILES)
    report = s3.json(f"runs/{run_id}/run-report.json")
    assert report["status"] == "complete" and report["executed_trials"] == 2
    assert report["bundle_path"] == f"s3://{BUCKET}/runs/{run_id}"
    assert "evaluator.log" in s3.names(f"runs/{run_id}")
    assert (tmp_path / "junit.xml").read_text().count("<testcase") == 2

    frames = load_frames(f"s3://{BUCKET}/runs/latest")
    assert list(frames.trials["trial_id"]) == ["trial-001", "trial-002"]
    assert set(frames.runs["run_id"]) == {run_id} and len(frames.turns) >= 2
    assert len(frames.events) > 0
    # the mirror holds the documents; the audio comes from the store when first played
    samples, rate = read_trial_audio(frames.trial_dir(trial_id="trial-001"))
    assert rate == 24_000 and samples.size > 0

    compared = cli(s3, "compare", f"s3://{BUCKET}/runs/{run_id}", f"s3://{BUCKET}/runs/latest",
                   "--max-pass-rate-drop", "0.5", cwd=tmp_path)
    assert compared.returncode == 0, compared.stdout + compared.stderr

    rescored = cli(s3, "rescore", f"s3://{BUCKET}/runs/latest", cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    assert f"bundle: s3://{BUCKET}/runs/{run_id}" in rescored.stdout
    assert "2/2 trial(s) passed after re-scoring" in rescored.stdout
    assert s3.names(f"runs/{run_id}/trial-001") == set(TRIAL_FILES)
    copied = cli(s3, "rescore", f"s3://{BUCKET}/runs/{run_id}", "--output",
                 f"s3://{BUCKET}/rescored", cwd=tmp_path)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert f"bundle: s3://{BUCKET}/rescored" in copied.stdout
    assert s3.names("rescored/trial-002") == set(TRIAL_FILES)
    assert s3.json("rescored/run-report.json")["run_id"] == run_id
    again = cli(s3, "rescore", f"s3://{BUCKET}/runs/{run_id}", "--output",
                f"s3://{BUCKET}/rescored", cwd=tmp_path)
    assert again.returncode == 2 and "is not empty" in again.stderr


@pytest.mark.slow
def test_report_of_a_run_in_s3_is_written_back_to_s3(s3, tmp_path):
    loaded = voicelab.load_run(EXAMPLE)
    outcome = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=1,
        artifacts_dir=f"s3://{BUCKET}/report")))
    result = cli(s3, "report", f"s3://{BUCKET}/report/latest", "--output",
                 f"s3://{BUCKET}/pages/report.html", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"report: s3://{BUCKET}/pages/report.html" in result.stdout
    s3.fs.invalidate_cache()
    page = s3.fs.cat_file(f"{BUCKET}/pages/report.html").decode()
    assert outcome.report.run_id in page and "trial-001" in page
    assert 'src="data:audio/ogg;base64,T2dnUw' in page  # the audio was fetched for the page
    assert list(tmp_path.iterdir()) == []


def test_resume_of_an_interrupted_run_in_s3(s3, tmp_path):
    """Interrupted once trial-001 is in the store. Five trials: calls go on while earlier ones
    are scored and published, so on a loaded machine the interrupt may land a trial or two
    later; what it left undone is what the resume runs."""
    planned = 5
    process = subprocess.Popen(
        [sys.executable, "-m", "voicelab", "run", str(EXAMPLE), "--trials", str(planned),
         "--concurrency", "1", "--artifacts-dir", f"s3://{BUCKET}/resume", "--set", LATENCY],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=s3.env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            s3.fs.invalidate_cache()
            if s3.fs.glob(f"{BUCKET}/resume/*/trial-001/trial-report.json"):
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stdout + stderr
    run_id = s3.fs.cat_file(f"{BUCKET}/resume/LATEST").decode().strip()
    before = s3.json(f"resume/{run_id}/run-report.json")
    assert before["status"] == "interrupted" and before["bundle_path"].startswith("s3://")
    finished = {p: s3.fs.info(p)["ETag"] for p in s3.fs.find(f"{BUCKET}/resume/{run_id}/trial-001")}
    reasons = [t["exit_reason"] for t in before["trials"]]
    assert reasons[0] == "endpoint_completion"
    done = reasons.count("endpoint_completion")
    assert done < planned

    result = cli(s3, "run", "--resume", f"s3://{BUCKET}/resume/latest", "--set", LATENCY,
                 cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{planned}/{planned} trial(s) passed" in result.stdout
    report = s3.json(f"resume/{run_id}/run-report.json")
    assert report["status"] == "complete" and report["run_id"] == run_id
    assert [(t["trial_id"], t["exit_reason"]) for t in report["trials"]] == [
        (f"trial-{index:03d}", "endpoint_completion") for index in range(1, planned + 1)]
    s3.fs.invalidate_cache()
    assert {p: s3.fs.info(p)["ETag"] for p in
            s3.fs.find(f"{BUCKET}/resume/{run_id}/trial-001")} == finished  # untouched
    for index in range(done + 1, planned + 1):  # the rerun replaced what was interrupted
        trial = f"trial-{index:03d}"
        assert s3.names(f"resume/{run_id}/{trial}") == set(TRIAL_FILES)
        assert s3.json(f"resume/{run_id}/{trial}/trial-report.json")["exit_reason"] == \
            "endpoint_completion"
    s3.fs.invalidate_cache()
    log = s3.fs.cat_file(f"{BUCKET}/resume/{run_id}/evaluator.log").decode()
    assert f"resumed: {planned - done} of {planned} planned trial(s) to run" in log
    assert "interrupted" in log
    assert list(tmp_path.iterdir()) == []


def test_bad_stores_are_configuration_errors_in_one_line(s3, tmp_path):
    unknown = cli(s3, "run", str(EXAMPLE), "--artifacts-dir", "nope://bucket/runs",
                  cwd=tmp_path, timeout=60)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    lines = unknown.stderr.strip().splitlines()
    assert len(lines) == 1 and "CLI: --artifacts-dir: unknown storage scheme nope://" in lines[0]
    no_bucket = cli(s3, "run", str(EXAMPLE), "--set", "artifacts_dir=s3://no-such-bucket/runs",
                    cwd=tmp_path, timeout=60)
    assert no_bucket.returncode == 2, no_bucket.stdout + no_bucket.stderr
    lines = no_bucket.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"voice-evaluator: error: {EXAMPLE}: artifacts_dir: cannot write to the store folder "
        "s3://no-such-bucket/runs")
    # s3fs missing: the exact pip line (the import is blocked in that process)
    blocked = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['s3fs'] = None; "
         "from voicelab.cli import main; "
         f"sys.exit(main(['run', {str(EXAMPLE)!r}, '--artifacts-dir', 's3://{BUCKET}/x']))"],
        capture_output=True, text=True, timeout=60, env=s3.env, cwd=tmp_path)
    assert blocked.returncode == 2, blocked.stdout + blocked.stderr
    lines = blocked.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        "CLI: --artifacts-dir: the s3:// artifact store needs the 's3fs' package: "
        "pip install 'voicelab[s3]'")
    refused = cli(s3, "run", str(EXAMPLE), "--trials", "0", "--artifacts-dir",
                  f"s3://{BUCKET}/zero", cwd=tmp_path, timeout=60)
    assert refused.returncode == 2 and "--trials: must be a whole number" in refused.stderr
    s3.fs.invalidate_cache()
    assert s3.fs.find(f"{BUCKET}/zero") == []  # no LATEST naming a run that never started
    missing = cli(s3, "report", f"s3://{BUCKET}/nothing-here", cwd=tmp_path, timeout=60)
    assert missing.returncode == 2 and "no such run directory" in missing.stderr
    assert list(tmp_path.iterdir()) == []  # no folder named after a scheme


def test_memory_store_run_resume_and_sweep():
    fs = fsspec.filesystem("memory")
    root = "memory://voicelab-test"
    loaded = voicelab.load_run(EXAMPLE)
    first = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=1,
        artifacts_dir=f"{root}/runs")))
    assert first.exit_code == 0 and first.location.startswith(f"{root}/runs/")
    assert not first.bundle_path.exists()  # the staging folder is gone once published
    report_path = f"/voicelab-test/runs/{first.report.run_id}/trial-001/trial-report.json"
    kept = fs.cat_file(report_path)
    extended = asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=2,
        resume=f"{root}/runs/latest")))
    assert extended.report.run_id == first.report.run_id
    assert extended.report.executed_trials == 2 and extended.exit_code == 0
    assert fs.cat_file(report_path) == kept
    frames = load_frames(first.location)
    assert list(frames.trials["trial_id"]) == ["trial-001", "trial-002"]
    with pytest.warns(DeprecationWarning):  # a bundle's own name is the keyword form's alone
        named = asyncio.run(voicelab.arun(loaded, trials=1, artifacts_dir=f"{root}/named",
                                          bundle_name="baseline", link_latest=False))
    assert named.location == f"{root}/named/baseline"
    assert not fs.exists("/voicelab-test/named/LATEST")

    sweep = asyncio.run(voicelab.arun_matrix(SWEEP, voicelab.RunOptions(
        trials=1,
        artifacts_dir=f"{root}/sweeps")))
    assert sweep.exit_code == 0 and sweep.location.startswith(f"{root}/sweeps/")
    matrix = json.loads(fs.cat_file(sweep.location.replace("memory://", "/") +
                                    "/matrix-report.json"))
    assert matrix["run_dir"] == sweep.location and len(matrix["cells"]) == 4
    assert all(c["bundle_path"].startswith(sweep.location + "/") for c in matrix["cells"])
    frames = load_frames(f"{root}/sweeps/latest")
    assert len(frames.trials) == 4 and frames.trials["cell"].notna().all()
    resumed = asyncio.run(voicelab.arun_matrix(SWEEP, voicelab.RunOptions(
        resume=f"{root}/sweeps/latest")))
    assert resumed.exit_code == 0 and resumed.location == sweep.location
    assert resumed.report.run_id == sweep.report.run_id and resumed.report.executed_trials == 4
    assert len(resumed.report.resumed_at) == 1


def test_a_sweep_to_s3_and_its_resume(s3, tmp_path):
    result = cli(s3, "sweep", str(SWEEP), "--trials", "1", "--artifacts-dir",
                 f"s3://{BUCKET}/sweeps", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    s3.fs.invalidate_cache()
    run_id = s3.fs.cat_file(f"{BUCKET}/sweeps/LATEST").decode().strip()
    assert f"matrix: s3://{BUCKET}/sweeps/{run_id}" in result.stdout
    matrix = s3.json(f"sweeps/{run_id}/matrix-report.json")
    assert matrix["status"] == "complete" and len(matrix["cells"]) == 4
    assert all(c["bundle_path"] == f"s3://{BUCKET}/sweeps/{run_id}/{c['cell_id']}"
               for c in matrix["cells"])
    for cell in matrix["cells"]:
        assert s3.names(f"sweeps/{run_id}/{cell['cell_id']}/trial-001") == set(TRIAL_FILES)
    again = cli(s3, "sweep", "--resume", f"s3://{BUCKET}/sweeps/latest", "--quiet",
                cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = s3.json(f"sweeps/{run_id}/matrix-report.json")
    assert resumed["run_id"] == run_id and len(resumed["resumed_at"]) == 1
    assert resumed["executed_trials"] == 4 and list(tmp_path.iterdir()) == []
