"""voicelab on uvloop, over real sockets on 127.0.0.1: the WebSocket client takes any loop's
stream transport (uvloop's are not ``asyncio.Transport`` subclasses), a failure of the client's
own code is an internal error (never the product's timeout or lost connection), and the
command line runs its trials, in-process and in worker processes, on the loop it logs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve

from voicelab.config import SecretScrubber
from voicelab.endpoints._socket import (
    Closure,
    MessageInbox,
    WebSocketConnection,
    WebSocketInternalError,
    closure_error,
)
from voicelab.endpoints._socket_open import open_websocket
from voicelab.execution import EVENT_LOOP_VARIABLE

uvloop = pytest.importorskip("uvloop")

ROOT = Path(__file__).resolve().parents[2]


async def _open(uri: str, inbox: MessageInbox) -> WebSocketConnection:
    return await open_websocket(uri, inbox=inbox, headers={}, connect_timeout_seconds=5,
                                max_message_bytes=1 << 20, clock_ns=time.perf_counter_ns,
                                where="test server", scrubber=SecretScrubber(),
                                user_agent="voicelab-test")


async def _talk(connection: ServerConnection) -> None:
    await connection.send(b"\x01\x02" * 480)
    await connection.send(json.dumps({"type": "response.done"}))
    echoed = await connection.recv()
    await connection.send(echoed)
    await connection.close()


async def _exchange() -> tuple[str, list[object]]:
    async with serve(_talk, "127.0.0.1", 0, compression=None) as server:
        uri = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        inbox = MessageInbox()
        connection = await _open(uri, inbox)
        await connection.send("hello")
        received: list[object] = []
        while not received or not isinstance(received[-1], Closure):
            received.append((await asyncio.wait_for(inbox.get(), 10))[1])
        await connection.close()
        return type(asyncio.get_running_loop()).__module__, received


def test_the_websocket_client_runs_on_uvloop():
    loop_module, received = uvloop.run(_exchange())
    assert loop_module.startswith("uvloop")
    assert received == [b"\x01\x02" * 480, '{"type": "response.done"}', "hello",
                        Closure(1000, "")]


async def _never_answers(connection: ServerConnection) -> None:
    await connection.wait_closed()


def test_a_failure_of_the_client_itself_before_the_handshake_is_internal(monkeypatch):
    def broken(self: WebSocketConnection) -> None:
        raise KeyError("a bug")

    async def connect() -> None:
        async with serve(_never_answers, "127.0.0.1", 0) as server:
            await _open(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}", MessageInbox())

    monkeypatch.setattr(WebSocketConnection, "_flush", broken)
    # said as what it is, not as the product's "no WebSocket handshake within 5 s"
    with pytest.raises(WebSocketInternalError, match="client failed: KeyError: 'a bug'"):
        asyncio.run(connect())


def test_a_failure_of_the_client_itself_after_the_handshake_says_so():
    closure = asyncio.run(_broken_after_handshake())
    assert isinstance(closure, Closure) and closure.local_failure and closure.code == 1011
    error = closure_error(closure, reason=closure.reason, mid_turn=True,
                          max_message_bytes=1 << 20)
    assert error is not None and error.code == "protocol_error"
    assert "voicelab's WebSocket client failed: ValueError: a bug" in error.message


async def _broken_after_handshake() -> object:
    async with serve(_never_answers, "127.0.0.1", 0, compression=None) as server:
        uri = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        inbox = MessageInbox()
        connection = await _open(uri, inbox)

        def broken(data: bytes) -> None:
            raise ValueError("a bug")

        connection._protocol.receive_data = broken  # type: ignore[method-assign]
        # the server's next bytes (its answer to our ping) reach the broken parser
        connection._protocol.send_ping(b"1234")
        connection._flush()
        return (await asyncio.wait_for(inbox.get(), 10))[1]


def _cli_run(suite: Path, *arguments: str, loop: str) -> str:
    """Runs the starter suite (the fake product over the WebSocket client)."""
    done = subprocess.run(
        [sys.executable, "-m", "voicelab", "run", "run.yaml", "--set",
         "scenario.eval_spec.max_first_audio_latency_ms=null", "--artifacts-dir", "runs",
         *arguments], cwd=suite, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), EVENT_LOOP_VARIABLE: loop})
    assert done.returncode == 0, done.stderr
    report = json.loads((suite / "runs" / "latest" / "run-report.json").read_text())
    assert report["passed_trials"] == report["executed_trials"] > 0
    return (suite / "runs" / "latest" / "evaluator.log").read_text()


def test_the_command_line_and_its_workers_run_on_uvloop_and_log_it(tmp_path):
    from voicelab.cli._init import init_suite

    suite = tmp_path / "suite"
    init_suite(suite)
    log = _cli_run(suite, "--trials", "2", "--workers", "2", loop="auto")
    assert "event loop: uvloop (worker processes: uvloop)" in log
