"""Launching the product: ready (the port, the environment, the working directory, a ready
line on stderr, a late bind), not ready (a timeout, an early exit, no program), secrets masked in
its log. Stopping it: test_launch_stop.py; the shared scripts and checks: _product_launch.py.

Real child processes, real ports, real signals; timeouts are hang guards only.
"""

from __future__ import annotations

import asyncio
import base64
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from _product_launch import (
    ENV_SECRET,
    SECRET,
    is_reaped,
    python,
    run,
    start_and_stop,
    until,
)

from voicelab.config import SecretScrubber
from voicelab.config._launch import LaunchConfig
from voicelab.endpoints import EndpointError, ProductProcess, pick_free_port

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
