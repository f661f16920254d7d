"""The benchmark's CPU columns: what they read is this process's and the scoring process's own
accounting (the benchmark compares voicelab's CPU a trial with the bare client's)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_runner.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_runner_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_process_cpu_is_read_from_proc(bench):
    assert bench._process_cpu_seconds(None) == 0.0
    assert bench._process_cpu_seconds(os.getpid()) > 0  # this process imported voicelab
    assert bench._process_cpu_seconds(2**22 + 1) == 0.0  # no such process


def test_the_meter_counts_the_block_s_cpu(bench):
    with bench.cpu_meter() as used:
        total = sum(i * i for i in range(200_000))  # work on this thread
    assert total > 0
    assert used["loop"] > 0
    assert used["scoring"] >= 0
