"""Stopping the launched product: a product that ignores SIGTERM, grandchildren (also ones
that left the process group), cancellation and Ctrl-C while it starts or runs, and a product
nobody stopped. Launching it: test_launch.py; the shared scripts and checks: _product_launch.py.

Real child processes, real signals; timeouts are hang guards only. "Gone" means no process with
that pid is running (see _product_launch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from _product_launch import (
    FAMILY,
    HANG_GUARD_SECONDS,
    assert_family_gone,
    grandchild_pid,
    is_reaped,
    is_running,
    python,
    run,
    run_script,
    until,
    wait_not_running,
)

from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess, _launch_stop, _process_tree

# --- stop -----------------------------------------------------------------------------------

def test_stop_kills_a_product_that_ignores_sigterm(tmp_path: Path) -> None:
    script = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print('listening on'); time.sleep(600)")
    product = ProductProcess(python(script, stop_grace_seconds=0.5), base_dir=tmp_path)

    async def scenario() -> tuple[int | None, int | None, int | None]:
        await product.start()
        first, second = await asyncio.gather(product.stop(), product.stop())
        return first, second, await product.stop()

    assert run(scenario()) == (-signal.SIGKILL,) * 3  # idempotent, concurrent calls included
    assert "SIGKILL to the process group" in product.log_text()
    assert is_reaped(product.pid)


class NeverSet(asyncio.Event):
    """An exit event nothing can set: a product SIGKILL cannot end (uninterruptible sleep)."""

    def set(self) -> None:
        pass


def test_stop_gives_up_on_a_product_whose_exit_never_comes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_launch_stop, "_KILLED_EXIT_SECONDS", 0.5)
    script = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "print('listening on'); time.sleep(600)")
    product = ProductProcess(python(script, stop_grace_seconds=0.2), base_dir=tmp_path)

    async def scenario() -> None:
        await product.start()
        product._exited = NeverSet()
        await product.stop()  # returns (it used to wait for the exit forever)

    run(scenario())
    log = product.log_text()
    assert log.index("SIGKILL to the process group") < log.index("after SIGKILL: given up")
    wait_not_running([product.pid])  # it was killed; only the news of its exit never came
    assert not is_running(product.pid)


def test_a_proc_scan_that_hangs_does_not_hold_the_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # reading a process's environment waits while that process's memory map is locked: an
    # unrelated process stuck so must not hang the product's stop (nor the interpreter's exit)
    monkeypatch.setattr(_launch_stop, "_SCAN_SECONDS", 0.3)
    product = ProductProcess(python("print('listening on'); import time; time.sleep(600)",
                                    stop_grace_seconds=2), base_dir=tmp_path)
    release = threading.Event()

    async def scenario() -> int | None:
        await product.start()
        monkeypatch.setattr(_process_tree, "_found", lambda *_: release.wait(60) and {})
        return await product.stop()

    try:
        status = run(scenario())
    finally:
        release.set()
    assert status == -signal.SIGTERM  # the product found at start is stopped all the same
    assert "/proc took over 0.3 s: given up" in product.log_text()


@pytest.mark.parametrize(("grandchild", "parent"), [
    ("polite", "polite"),        # SIGTERM reaches the whole group
    ("stubborn", "polite"),      # the parent exits on SIGTERM, its child needs SIGKILL
    ("stubborn", "leaves"),      # the parent exited long ago, leaving its child running
])
def test_stop_leaves_no_grandchild_running(tmp_path: Path, grandchild: str, parent: str) -> None:
    launch = python(FAMILY, grandchild, parent, ready_pattern="grandchild armed",
                    stop_grace_seconds=0.5)
    product = ProductProcess(launch, base_dir=tmp_path)

    async def scenario() -> int | None:
        await product.start()
        if parent == "leaves":
            await until(lambda: product.returncode is not None)
        assert is_running(grandchild_pid(product))
        return await product.stop()

    status = run(scenario())
    assert not is_running(grandchild_pid(product))
    assert is_reaped(product.pid)
    assert status == {"leaves": 0, "polite": -signal.SIGTERM}[parent]
    assert ("SIGKILL" in product.log_text()) == (grandchild == "stubborn")


#: a shell product whose children leave its process group: one in a session of its own
#: (``setsid``), one in a group of its own, a daemon whose parent exits at once (a double fork),
#: and, when asked, one of them ignoring SIGTERM; it reports their pids, then waits
ESCAPERS = r"""
python="$1"; stubborn="$2"
if [ "$stubborn" = stubborn ]; then trap '' TERM; fi
setsid sleep 300 &
echo "escaped session $!"
"$python" -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' &
echo "escaped group $!"
( setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo "escaped daemon $!" )
trap - TERM
echo "ready"
wait
"""


def escaped_pids(process: ProductProcess) -> list[int]:
    return [int(line.text.split()[-1]) for line in process.lines
            if line.text.startswith("escaped ")]


@pytest.mark.parametrize("stubborn", ["polite", "stubborn"])
def test_stop_reaches_children_that_left_the_process_group(tmp_path: Path, stubborn: str) -> None:
    launch = LaunchConfig.model_validate({
        "command": ["sh", "-c", ESCAPERS, "sh", sys.executable, stubborn],
        "ready_pattern": "^ready$", "stop_grace_seconds": 0.5})
    product = ProductProcess(launch, base_dir=tmp_path)

    pids: list[int] = []

    def left_the_group() -> bool:
        with contextlib.suppress(ProcessLookupError):
            return all(os.getpgid(pid) != product.pid for pid in pids)
        return False

    async def scenario() -> None:
        await product.start()
        pids.extend(escaped_pids(product))
        assert len(pids) == 3 and all(is_running(pid) for pid in pids)
        await until(left_the_group)  # setsid() and setpgid() are theirs to call, soon
        await product.stop()

    try:
        run(scenario())
        assert not [pid for pid in pids if is_running(pid)]
        assert is_reaped(product.pid)
        assert ("SIGKILL" in product.log_text()) == (stubborn == "stubborn")
    finally:  # never leave them behind on a failure
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- cancellation (Ctrl-C) ------------------------------------------------------------------

def test_cancelling_a_trial_inside_the_context_stops_the_family(tmp_path: Path) -> None:
    product = ProductProcess(python(FAMILY, "stubborn", "polite", ready_pattern="armed",
                                    stop_grace_seconds=0.5), base_dir=tmp_path)

    async def scenario() -> None:
        entered = asyncio.Event()

        async def trial() -> None:
            async with product:
                entered.set()
                await asyncio.sleep(3600)

        task = asyncio.create_task(trial())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert_family_gone(product)


def test_cancelling_start_while_waiting_for_ready_stops_the_family(tmp_path: Path) -> None:
    product = ProductProcess(python(FAMILY, "stubborn", "stubborn", ready_pattern="never"),
                             base_dir=tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(product.start())
        await until(lambda: any("armed" in line.text for line in product.lines))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert_family_gone(product)


def test_ctrl_c_in_a_script_stops_the_product_and_its_children(tmp_path: Path) -> None:
    source = f"""
import asyncio, faulthandler, signal, sys
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess

faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, should it hang
# a terminal's foreground job takes Ctrl-C; a SIGINT ignored where the test runs (inherited:
# Python then leaves it ignored, and asyncio.run installs no handler) would make it a no-op
signal.signal(signal.SIGINT, signal.default_int_handler)
FAMILY = {FAMILY!r}

async def main():
    launch = LaunchConfig(command=[sys.executable, "-c", FAMILY, "polite", "polite"],
                          ready_pattern="armed", stop_grace_seconds=2)
    async with ProductProcess(launch) as product:
        # the ready line is the grandchild's: on a loaded machine it can come before the line
        # its parent prints once it has started it
        while not any(line.text.startswith("grandchild pid") for line in product.lines):
            await asyncio.sleep(0.01)
        grandchild = next(line.text.split()[-1] for line in product.lines
                          if line.text.startswith("grandchild pid"))
        print(product.pid, grandchild, flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""
    with run_script(tmp_path / "driver.py", source) as script:
        try:
            ready = read_line(script.stdout, HANG_GUARD_SECONDS)
            if not ready:  # exited, or stuck before it was ready: say where
                script.kill()
                pytest.fail(f"the script never reported its pids: {script.communicate()[1]}")
            pids = [int(pid) for pid in ready.split()]
            assert all(is_running(pid) for pid in pids)
            script.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground job
            try:
                _, stderr = script.communicate(timeout=HANG_GUARD_SECONDS)
            except subprocess.TimeoutExpired:  # say where it hangs: every thread's stack
                script.send_signal(signal.SIGUSR1)
                time.sleep(1)
                script.kill()
                pytest.fail(f"no exit {HANG_GUARD_SECONDS} s after SIGINT; the script's "
                            f"stacks:\n{script.communicate()[1][-20_000:]}")
        finally:
            script.kill()
    assert "KeyboardInterrupt" in stderr and "never stopped" not in stderr
    wait_not_running(pids)  # the script has exited: nothing more can come from it
    assert not any(is_running(pid) for pid in pids)


def read_line(stream: IO[str], seconds: float) -> str:
    """The next line of a child's output, or "" when none came within ``seconds`` (a script
    stuck before printing must fail the test, not hang it)."""
    readable, _, _ = select.select([stream], [], [], seconds)
    return stream.readline() if readable else ""


def test_a_product_never_stopped_is_killed_when_dropped(tmp_path: Path) -> None:
    # in a script of its own: asyncio complains about the transport of a dropped process
    # whose loop has closed, and that noise belongs to no test here
    source = """
import asyncio, gc, sys
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess

async def forget():
    launch = LaunchConfig(command=[sys.executable, "-c",
                                   "import time; print('ready'); time.sleep(600)"],
                          ready_pattern="ready")
    product = ProductProcess(launch)
    await product.start()
    return product.pid

pid = asyncio.run(forget())
gc.collect()
print(pid, flush=True)
"""
    with run_script(tmp_path / "forget.py", source) as script:
        try:
            stdout, stderr = script.communicate(timeout=HANG_GUARD_SECONDS)
        finally:
            script.kill()
    assert "was never stopped; killed it" in stderr
    pid = int(stdout)
    wait_not_running([pid])
    assert not is_running(pid)
