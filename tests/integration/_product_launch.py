"""What the product-launch modules share (test_launch.py, test_launch_stop.py): real child
processes (small Python scripts), and the checks of who is still running.

Timeouts here are hang guards only; nothing asserts how long anything took. "Gone" means no
process with that pid is running: absent, or a zombie waiting for its parent or init to reap
it (a grandchild is not ours to reap; our own child is reaped, which the tests check too).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess

HANG_GUARD_SECONDS = 60
SECRET = "sk-launch-SECRET-5e1f"
ENV_SECRET = "env-SECRET-90ab77"
ROOT = Path(__file__).resolve().parents[2]

#: a grandchild that ignores SIGTERM when asked to; the parent too when asked to
FAMILY = r"""
import signal, subprocess, sys, time
GRANDCHILD = '''
import signal, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("grandchild armed", flush=True)
time.sleep(600)
'''
mode, parent = sys.argv[1], sys.argv[2]
if parent == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", GRANDCHILD, mode])
print("grandchild pid", child.pid, flush=True)
if parent == "leaves":
    sys.exit(0)
time.sleep(600)
"""


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, HANG_GUARD_SECONDS))


def python(script: str, *args: str, **settings: Any) -> LaunchConfig:
    return LaunchConfig.model_validate({
        "command": [sys.executable, "-c", script, *args],
        "ready_pattern": settings.pop("ready_pattern", "listening on"),
        "stop_grace_seconds": settings.pop("stop_grace_seconds", 2), **settings})


def is_running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def is_reaped(pid: int) -> bool:
    """Our own child leaves no zombie: waitpid finds nothing left to collect."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def grandchild_pid(process: ProductProcess) -> int:
    for line in process.lines:
        if line.text.startswith("grandchild pid"):
            return int(line.text.split()[-1])
    raise AssertionError("the product never reported its grandchild")


async def start_and_stop(product: ProductProcess) -> int | None:
    """Start (up to ready) then stop, in one event loop as a trial would."""
    await product.start()
    return await product.stop()


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.02)


def run_script(path: Path, source: str) -> subprocess.Popen[str]:
    path.write_text(source)
    return subprocess.Popen([sys.executable, "-W", "always::ResourceWarning", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def wait_not_running(pids: list[int]) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while any(is_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def assert_family_gone(product: ProductProcess) -> None:
    """The product is gone and reaped, and so is the grandchild it reported."""
    assert not is_running(product.pid) and is_reaped(product.pid)
    assert not is_running(grandchild_pid(product))
