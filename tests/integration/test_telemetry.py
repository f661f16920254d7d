"""Telemetry over real sockets: a real OTLP/HTTP receiver on 127.0.0.1 (ExportTraceServiceRequest
decoded with opentelemetry-proto, no SDK mocked) takes the traces of runs of the fake product,
whose own log says which trace context its sessions were sent; a collector stopped mid-run
costs spans, never a trial; the live metrics endpoint is scraped while a run goes."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import voicelab
from voicelab.runner import RunOutcome
from voicelab.telemetry import Telemetry

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run-workload-neutral-voice.yaml"
#: the fake product answers this much later: trials long enough to be seen in flight
SLOW_REPLIES = "endpoint.settings.reply_latency_ms=250"


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    """An OTLP/HTTP traces endpoint: every span it was sent, with its resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                for resource_spans in request.resource_spans:
                    resource = {a.key: _value(a.value)
                                for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append({
                                "name": span.name, "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex() or None,
                                "start_ns": span.start_time_unix_nano,
                                "end_ns": span.end_time_unix_nano,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "events": [e.name for e in span.events],
                                "links": [(link.trace_id.hex(), link.span_id.hex())
                                          for link in span.links],
                                "status": span.status.code, "resource": resource})
                receiver.requests += 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Down: the port refuses connections from now on."""
        self.server.shutdown()
        self.server.server_close()


def _arun(artifacts: Path, telemetry: Telemetry, *overrides: str, trials: int,
          on_trial_done: Any = None) -> RunOutcome:
    loaded = voicelab.load_run(EXAMPLE, overrides=list(overrides))
    return asyncio.run(voicelab.arun(loaded, voicelab.RunOptions(
        trials=trials,
        concurrency=1,
        artifacts_dir=artifacts,
        observers=telemetry.observers,
        on_trial_done=on_trial_done)))


def _first_event(trial_dir: Path) -> dict[str, Any]:
    with open(trial_dir / "voice-events.jsonl", encoding="utf-8") as lines:
        return json.loads(lines.readline())


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[RunOutcome, OtlpReceiver]:
    receiver = OtlpReceiver()
    with Telemetry(otlp=receiver.url) as telemetry:
        outcome = _arun(tmp_path_factory.mktemp("traces"), telemetry, trials=2)
    receiver.stop()
    return outcome, receiver


def test_each_trial_is_a_trace_under_its_bundles_ids(exported):
    outcome, receiver = exported
    report = outcome.report
    assert report.exit_code == 0
    # every span the run made reached the collector, and the report says so
    assert report.telemetry is not None and report.telemetry.traces == 2
    assert report.telemetry.spans == report.telemetry.spans_exported == len(receiver.spans)
    assert report.telemetry.spans_failed == 0 and report.telemetry.warning is None
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in receiver.spans:
        by_trace[span["trace_id"]].append(span)
    [run_span] = [s for s in receiver.spans if s["name"] == "voicelab.run"]
    assert run_span["attributes"]["voicelab.run.id"] == report.run_id
    assert run_span["attributes"]["test.suite.run.status"] == "success"
    assert run_span["resource"]["service.name"] == "voicelab"
    for trial in outcome.trials:
        trial_dir = outcome.bundle_path / trial.report.trial_id
        first = _first_event(trial_dir)
        root = first["trace"]["span_id"]
        spans = by_trace[trial.report.trace_id]  # the trace id is the bundle's
        [trial_span] = [s for s in spans if s["name"] == "voicelab.trial"]
        # the root span is the one the product was sent, linked to the run's span
        assert trial_span["span_id"] == root and trial_span["parent"] is None
        assert trial_span["links"] == [(run_span["trace_id"], run_span["span_id"])]
        assert trial_span["attributes"]["session.id"] == trial.report.session_id
        assert trial_span["attributes"]["test.case.result.status"] == "pass"
        # placed on the recording's clock: its UTC zero, to the microsecond the bundle keeps
        stamp = voicelab.telemetry.read_timeline(trial_dir)
        assert stamp is not None and trial_span["start_ns"] == stamp.start_utc_ns
        ids = {s["span_id"]: s for s in spans}
        for span in spans:  # every span hangs off the trial span
            chain = span
            while chain["parent"] is not None:
                chain = ids[chain["parent"]]
            assert chain is trial_span
            assert span["start_ns"] <= span["end_ns"]
        # a response span per row of voice-metrics.json, its figures the bundle's
        metrics = json.loads((trial_dir / "voice-metrics.json").read_text())
        responses = {s["attributes"]["voicelab.turn_id"]: s for s in spans
                     if s["name"] == "voicelab.response"}
        assert set(responses) == {turn["turn_id"] for turn in metrics["turns"]}
        for turn in metrics["turns"]:
            attributes = responses[turn["turn_id"]]["attributes"]
            assert responses[turn["turn_id"]]["parent"] == root
            for name in ("response_latency_ms", "first_audio_latency_ms", "dead_air_ms",
                         "interrupted", "stamp_error_bound_ms", "timing_degraded"):
                assert attributes.get(f"voicelab.response.{name}") == turn.get(name), name
        assert any(t["response_latency_ms"] is not None for t in metrics["turns"])
        # the user's turns, and the product's tool call under the response that made it
        assert [s["attributes"]["voicelab.turn_id"] for s in spans
                if s["name"] == "voicelab.user_turn"] == ["turn-001"]
        [tool] = [s for s in spans if s["name"] == "execute_tool save_reminder"]
        assert tool["parent"] == responses["turn-001"]["span_id"]
        assert tool["attributes"]["gen_ai.tool.name"] == "save_reminder"
        assert [s["name"] for s in spans].count("voicelab.outcome_probe") == 1


def test_the_product_was_sent_the_trial_span_to_join(exported):
    outcome, _ = exported
    log = (outcome.bundle_path / "evaluator.log").read_text(encoding="utf-8")
    sent = {line.split("session ")[1].split(" ")[0]: line.rsplit("traceparent=", 1)[1].strip()
            for line in log.splitlines() if "joins trace context traceparent=" in line}
    assert len(sent) == 2
    for trial in outcome.trials:
        root = _first_event(outcome.bundle_path / trial.report.trial_id)["trace"]["span_id"]
        # the product double read it from the handshake: its spans would be the trial's children
        assert sent[trial.report.session_id] == f"00-{trial.report.trace_id}-{root}-01"


def test_a_collector_down_mid_run_costs_spans_not_trials(tmp_path):
    receiver = OtlpReceiver()
    artifacts = tmp_path / "runs"
    environment = {**os.environ, "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
                   "OTEL_BSP_SCHEDULE_DELAY": "50", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "voicelab.cli", "run", str(EXAMPLE), "--trials", "3",
               "--concurrency", "1", "--artifacts-dir", str(artifacts), "--quiet",
               "--otlp", receiver.url, "--set", SLOW_REPLIES]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=environment, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not list(artifacts.glob("*/trial-001/trial-report.json")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    receiver.stop()  # the collector goes down after the first trial
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr  # as the run would have exited
    [bundle] = [p for p in artifacts.iterdir() if p.name != "latest"]
    report = json.loads((bundle / "run-report.json").read_text())
    assert report["status"] == "complete" and report["executed_trials"] == 3
    assert all((bundle / f"trial-00{n}" / "trial-report.json").is_file() for n in (1, 2, 3))
    telemetry = report["telemetry"]
    assert telemetry["traces"] == 3 and telemetry["spans_failed"] > 0
    assert telemetry["spans_exported"] + telemetry["spans_failed"] == telemetry["spans"]
    assert telemetry["spans_exported"] == len(receiver.spans)
    assert "did not take" in telemetry["warning"]
    assert "LOST (the run itself is unaffected)" in stdout
    assert "WARNING voicelab.telemetry" in stderr and "Traceback" not in stderr


def _scrape(url: str) -> dict[str, float]:
    """The samples of one scrape, by name and sorted labels, summed over cells."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    values: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())
                              if k in ("status", "execution_status", "le"))
            values[f"{sample.name}{{{labels}}}"] += sample.value
    return values


def test_live_metrics_grow_during_a_run_and_end_at_the_reports_counts(tmp_path):
    trials = 4
    with Telemetry(metrics_port=0) as telemetry:
        url = telemetry.metrics.url
        scrapes: list[dict[str, float]] = []
        running = threading.Event()
        running.set()

        def scraper() -> None:
            while running.is_set():
                scrapes.append(_scrape(url))
                time.sleep(0.02)

        thread = threading.Thread(target=scraper, daemon=True)
        thread.start()
        try:
            outcome = _arun(tmp_path, telemetry, SLOW_REPLIES, trials=trials)
        finally:
            running.clear()
            thread.join()
        final = _scrape(url)
    report = outcome.report

    def finished(scrape: dict[str, float]) -> float:
        return sum(v for k, v in scrape.items() if k.startswith("voicelab_trials_finished_total"))

    seen = [finished(s) for s in scrapes]
    assert seen == sorted(seen)  # counters only grow
    assert any(0 < n < trials for n in seen)  # ... and were seen growing mid-run
    assert any(s["voicelab_trials_in_progress{}"] == 1 for s in scrapes)
    # the final counts are the run report's
    assert final["voicelab_trials_started_total{}"] == trials
    assert final["voicelab_trials_in_progress{}"] == 0
    assert finished(final) == report.executed_trials == trials
    assert final["voicelab_trials_finished_total{execution_status=succeeded,status=passed}"] \
        == report.passed_trials
    assert final["voicelab_trials_timing_degraded_total{}"] == report.degraded_trials
    assert final["voicelab_timing_degraded_fraction{}"] == pytest.approx(
        report.degraded_trials / report.executed_trials)
    latencies = [t.response_latency_ms for r in outcome.trials for t in r.turn_metrics
                 if t.response_latency_ms is not None]
    assert final["voicelab_response_latency_seconds_count{}"] == len(latencies) > 0
    assert final["voicelab_response_latency_seconds_sum{}"] == pytest.approx(
        sum(latencies) / 1000)
