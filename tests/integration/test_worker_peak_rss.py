"""A worker's peak memory is its own: a parent holding a few hundred MB starts a child (as
voicelab starts its workers: fork and exec), and the child's ``peak_rss_kib`` stays near what
the child itself used, while its ``ru_maxrss`` carries the parent's peak across exec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELD_MIB = 400

PARENT = f"""
import subprocess, sys
held = b"x" * ({HELD_MIB} * 1024 * 1024)  # touched: resident, not merely reserved
child = ("import json, resource; from voicelab.execution._worker import peak_rss_kib; "
         "print(json.dumps({{'own': peak_rss_kib(), "
         "'ru_maxrss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}}))")
done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_childs_peak_is_its_own_not_its_parents():
    done = subprocess.run([sys.executable, "-c", PARENT], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                      "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    # what the fix avoids: the kernel's figure is at least the parent's 400 MiB
    assert figures["ru_maxrss"] >= HELD_MIB * 1024
    # the child's own: an interpreter with voicelab's execution package imported (~100 MiB)
    assert figures["own"] < HELD_MIB * 1024 / 2
