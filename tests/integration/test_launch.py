"""Launching the product: real child processes (small Python scripts), real ports, real signals.

Timeouts here are hang guards only; nothing asserts how long anything took. "Gone" means no
process with that pid is running: absent, or a zombie waiting for its parent or init to reap
it (a grandchild is not ours to reap; our own child is reaped, which the tests check too).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from voicelab.config import SecretScrubber
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import EndpointError, ProductProcess, pick_free_port

HANG_GUARD_SECONDS = 60
SECRET = "sk-launch-SECRET-5e1f"
ENV_SECRET = "env-SECRET-90ab77"
ROOT = Path(__file__).resolve().parents[2]

#: serves one client on the port from argv, greeting it with $GREETING, then exits
ONE_CLIENT_BOT = r"""
import os, socket, sys
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
print("listening on", sys.argv[1])  # no flush: the launcher sets PYTHONUNBUFFERED
client, _ = server.accept()
client.sendall(os.environ["GREETING"].encode())
client.close()
"""

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


# --- ready, the port, the environment, the working directory --------------------------------

def test_the_port_placeholder_gives_a_port_the_product_binds_and_serves(tmp_path: Path) -> None:
    launch = python(ONE_CLIENT_BOT, "{port}", env={"GREETING": "hello on {port}"})

    async def scenario() -> tuple[ProductProcess, dict[str, Any], bytes, int | None]:
        async with ProductProcess(launch, settings={"uri": "ws://127.0.0.1:{port}/"},
                                  base_dir=tmp_path) as product:
            settings = product.settings
            reader, writer = await asyncio.open_connection("127.0.0.1", product.port)
            greeting = await reader.read()
            writer.close()
            await until(lambda: product.returncode is not None)  # one client, then it exits
        return product, settings, greeting, await product.stop()

    product, settings, greeting, status = run(scenario())
    assert product.ready and isinstance(product.port, int)
    assert settings == {"uri": f"ws://127.0.0.1:{product.port}/"}
    assert greeting == f"hello on {product.port}".encode()
    assert status == 0  # it exited on its own: no signal was needed
    log = product.log_text()
    assert f"stdout] listening on {product.port}\n" in log
    assert "SIGTERM" not in log and "exited with code 0" in log
    assert is_reaped(product.pid)


def test_log_lines_carry_the_stream_and_seconds_since_start(tmp_path: Path) -> None:
    script = "import sys; print('to err', file=sys.stderr, flush=True); print('listening on')"
    product = ProductProcess(python(script), base_dir=tmp_path)
    run(start_and_stop(product))
    lines = product.log_text().splitlines()
    assert any(line.endswith(" stderr] to err") for line in lines)
    assert any(line.endswith(" stdout] listening on") for line in lines)
    assert all(line.startswith("[+") and "s " in line.split("]")[0] for line in lines)
    stamps = [line.time_ns for line in product.lines]
    assert stamps == sorted(stamps)


def test_the_product_runs_in_cwd_relative_to_the_run_folder(tmp_path: Path) -> None:
    (tmp_path / "bots").mkdir()
    script = "import os; print('listening in', os.getcwd())"
    for cwd, expected in (("bots", tmp_path / "bots"), (None, tmp_path)):
        product = ProductProcess(python(script, ready_pattern="listening in", cwd=cwd),
                                 base_dir=tmp_path)
        run(start_and_stop(product))
        assert f"stdout] listening in {expected}\n" in product.log_text()


def test_a_product_flooding_stderr_before_its_ready_line_is_not_blocked(tmp_path: Path) -> None:
    # 8 MiB of stderr before the ready line: far more than a pipe holds, so an unread stderr
    # would block the product forever and the ready line would never come
    script = ("import sys\nfor i in range(8 * 1024):\n    sys.stderr.write('e' * 1023 + '\\n')\n"
              "print('listening on', flush=True)\nimport time; time.sleep(600)")
    product = ProductProcess(python(script), base_dir=tmp_path, max_log_lines=40)
    run(start_and_stop(product))
    assert product.ready and product.dropped_lines > 0


def test_the_log_keeps_its_start_and_its_latest_lines_within_budget(tmp_path: Path) -> None:
    # 1000 numbered lines, one 1 MB line without a newline, then the ready line
    script = ("import sys\nfor i in range(1000):\n    print('line', i)\n"
              "sys.stdout.write('x' * 1_000_000)\nprint()\nprint('listening on')")
    product = ProductProcess(python(script), base_dir=tmp_path, max_log_lines=40)
    run(start_and_stop(product))
    kept = product.lines
    assert len(kept) <= 40
    log = product.log_text()
    assert "stdout] line 0\n" in log and "stdout] line 998\n" in log  # start and end kept
    assert "stdout] line 500\n" not in log
    assert f"[... {product.dropped_lines} lines (" in log
    kept_output = sum(1 for line in kept if line.stream == "stdout")
    assert kept_output + product.dropped_lines == 1000 + 2  # + the long line + the ready line
    long_line = next(line.text for line in kept if line.text.startswith("xxx"))
    assert long_line.endswith(f" [... {1_000_000 - 4096} more bytes]")


# --- not ready: timeout, early exit, no program ---------------------------------------------

def test_a_product_that_never_prints_its_ready_line_times_out(tmp_path: Path) -> None:
    script = (f"import sys, time; print('starting up'); print('warming up with {SECRET}', "
              "file=sys.stderr, flush=True); time.sleep(600)")
    launch = python(script, "--token", "ARGUMENT-not-in-messages", ready_timeout_seconds=1)
    product = ProductProcess(launch, base_dir=tmp_path, scrubber=SecretScrubber([SECRET]))
    with pytest.raises(EndpointError) as caught:
        run(product.start())
    error = caught.value
    assert error.code == "launch_timeout"
    message = str(error)
    assert "\n" not in message
    assert repr(sys.executable) in message and "within 1 s" in message
    assert "last stderr line: warming up with ***" in message
    assert SECRET not in message and "ARGUMENT-not-in-messages" not in message
    # stopped before the error was raised, and its output kept for product.log
    assert product.returncode == -signal.SIGTERM and is_reaped(product.pid)
    assert "stdout] starting up" in product.log_text()


def test_a_product_that_exits_before_ready_fails_with_its_exit_code(tmp_path: Path) -> None:
    script = "import sys; print('bad config', file=sys.stderr); sys.exit(3)"
    product = ProductProcess(python(script), base_dir=tmp_path)
    with pytest.raises(EndpointError) as caught:
        run(product.start())
    assert caught.value.code == "launch_failed"
    assert "exited with code 3 before an output line matched ready_pattern 'listening on'" in str(
        caught.value)
    assert str(caught.value).endswith("; last stderr line: bad config")
    assert run(product.stop()) == 3  # already stopped: the same status, in any event loop


def test_a_ready_line_printed_just_before_exiting_still_counts(tmp_path: Path) -> None:
    # the exit may be noticed while the pipe still holds the last output (up to a pipe's size)
    script = "for _ in range(2000): print('x' * 200)\nprint('listening on')"
    product = ProductProcess(python(script), base_dir=tmp_path)
    status = run(start_and_stop(product))
    assert product.ready
    assert status in (0, -signal.SIGTERM)  # it may not have finished exiting when stopped


def test_a_program_that_cannot_start_is_a_launch_failure(tmp_path: Path) -> None:
    launch = LaunchConfig(command=["no-such-voice-bot-xyz", "--secret", SECRET],
                          ready_pattern="x")
    with pytest.raises(EndpointError) as caught:
        run(ProductProcess(launch, base_dir=tmp_path).start())
    assert caught.value.code == "launch_failed"
    assert "cannot start the product 'no-such-voice-bot-xyz'" in str(caught.value)
    assert SECRET not in str(caught.value)


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
    assert not is_running(product.pid) and is_reaped(product.pid)
    assert not is_running(grandchild_pid(product))


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
    assert not is_running(product.pid) and is_reaped(product.pid)
    assert not is_running(grandchild_pid(product))


def test_ctrl_c_in_a_script_stops_the_product_and_its_children(tmp_path: Path) -> None:
    source = f"""
import asyncio, sys
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import ProductProcess

FAMILY = {FAMILY!r}

async def main():
    launch = LaunchConfig(command=[sys.executable, "-c", FAMILY, "polite", "polite"],
                          ready_pattern="armed", stop_grace_seconds=2)
    async with ProductProcess(launch) as product:
        grandchild = next(line.text.split()[-1] for line in product.lines
                          if line.text.startswith("grandchild pid"))
        print(product.pid, grandchild, flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""
    with run_script(tmp_path / "driver.py", source) as script:
        try:
            ready = script.stdout.readline()
            assert ready, script.stderr.read()
            pids = [int(pid) for pid in ready.split()]
            assert all(is_running(pid) for pid in pids)
            script.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground job
            _, stderr = script.communicate(timeout=HANG_GUARD_SECONDS)
        finally:
            script.kill()
    assert "KeyboardInterrupt" in stderr and "never stopped" not in stderr
    wait_not_running(pids)  # the script has exited: nothing more can come from it
    assert not any(is_running(pid) for pid in pids)


# --- secrets --------------------------------------------------------------------------------

def test_secrets_in_the_products_output_are_masked_in_the_log(tmp_path: Path) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    script = (f"import os, sys; print('token {SECRET} as', {encoded!r}); "
              "print('key', os.environ['API_KEY'], file=sys.stderr); print('listening on')")
    launch = python(script, env={"API_KEY": ENV_SECRET})
    product = ProductProcess(launch, base_dir=tmp_path, scrubber=SecretScrubber([SECRET]))
    run(start_and_stop(product))
    for log in (product.log_text(), product.log_text(SecretScrubber([SECRET]))):
        assert SECRET not in log and encoded not in log and ENV_SECRET not in log
        assert "stdout] token *** as ***" in log and "stderr] key ***" in log


def test_free_ports_are_bindable_and_not_repeated() -> None:
    ports = [pick_free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", ports[-1]))



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


# --- ready on stderr, a late bind, a pattern that backtracks ----------------------------------

#: logs its readiness to stderr (as uvicorn does) well before it binds, then serves one client
LATE_BINDER = r"""
import socket, sys, time
print("INFO: Uvicorn running on 127.0.0.1:" + sys.argv[1], file=sys.stderr, flush=True)
time.sleep(1.0)
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
client, _ = server.accept()
client.sendall(b"served")
client.close()
"""


def test_a_product_ready_on_stderr_that_binds_late_is_waited_for(tmp_path: Path) -> None:
    launch = python(LATE_BINDER, "{port}", ready_pattern="Uvicorn running on",
                    ready_timeout_seconds=20)

    async def scenario() -> tuple[ProductProcess, bytes]:
        async with ProductProcess(launch, settings={"uri": "ws://127.0.0.1:{port}/"},
                                  base_dir=tmp_path) as product:
            # the first connection after start(): refused had start() returned at the log line
            reader, writer = await asyncio.open_connection("127.0.0.1", product.port)
            served = await reader.read()
            writer.close()
        return product, served

    product, served = run(scenario())
    assert served == b"served"  # its one client was the adapter's, not spent on a probe
    log = product.log_text()
    assert "stderr] INFO: Uvicorn running on" in log
    assert "accepts connections (after" in log  # it was not listening when the line came


def test_a_product_that_never_binds_fails_within_the_ready_timeout(tmp_path: Path) -> None:
    script = "import sys, time; print('ready', file=sys.stderr, flush=True); time.sleep(60)"
    launch = python(script, "{port}", ready_pattern="ready", ready_timeout_seconds=1.5)
    product = ProductProcess(launch, settings={"uri": "ws://127.0.0.1:{port}/"},
                             base_dir=tmp_path)
    with pytest.raises(EndpointError) as caught:
        run(product.start())
    assert caught.value.code == "launch_timeout"
    assert f"refused connections on 127.0.0.1:{product.port} for 1.5 s" in str(caught.value)
    assert is_reaped(product.pid)


@pytest.mark.parametrize(("line", "pattern", "timeout", "code", "says"), [
    # the audited pattern: 4,000 a's and a b backtrack for ever with Python's re, and the
    # launch must still give up after ready_timeout_seconds
    ("a" * 4000 + "b", "^(a+)+$", 1.5, "launch_timeout", "within 1.5 s"),
    # one that takes the regex module longer than a line's matching time: failed at once
    ("a" * 40 + "!", "^(a|a)+$", 30, "launch_failed",
     "to match ready_pattern '^(a|a)+$' against one output line"),
], ids=["audited-pattern", "too-slow-for-one-line"])
def test_a_catastrophic_ready_pattern_never_outlasts_the_ready_timeout(
        tmp_path: Path, line: str, pattern: str, timeout: float, code: str, says: str) -> None:
    script = f"import time; print({line!r}, flush=True); time.sleep(60)"
    product = ProductProcess(python(script, ready_pattern=pattern, ready_timeout_seconds=timeout),
                             base_dir=tmp_path)
    with pytest.raises(EndpointError) as caught:
        run(asyncio.wait_for(product.start(), 20))  # well before a 30 s ready timeout
    assert caught.value.code == code
    assert says in str(caught.value)
    assert is_reaped(product.pid)
