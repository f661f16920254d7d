"""The shared machinery of local protocol-v1 products (the fake and the demo agent), without
sockets: the strict protocol state machine on a stub connection, the SQLite base, the adapter
settings split and the standalone entry's error paths."""

from __future__ import annotations

import asyncio
import gc
import json
from types import SimpleNamespace
from typing import Any, Literal

import pytest

from voicelab.doubles.product import ProductClientSettings, ProductServer
from voicelab.doubles.product import _store as product_store
from voicelab.doubles.product._connection import VIOLATION_CLOSE_CODE, ProductConnection
from voicelab.doubles.product._main import serve_product_main, settings_argument
from voicelab.endpoints._settings import AdapterSettings
from voicelab.endpoints.websocket import _wire as wire

TOY_SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, turn_index INTEGER NOT NULL,
    topic TEXT NOT NULL, plan_text TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reminders (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, text TEXT NOT NULL,
    time TEXT NOT NULL, created_at TEXT NOT NULL);
"""
FRAME = b"\x01\x00" * 8


class ToyBehaviour(AdapterSettings):
    access_token: str | None = None
    audio_pacing: Literal["burst", "realtime"] = "burst"
    pacing_speed: float = 1.0
    database_path: str | None = None
    max_client_message_bytes: int = 1 << 20


class ToyStore(product_store.ProductStore):
    schema = TOY_SCHEMA


class ToyDatabaseDir(product_store.ProductDatabaseDir):
    prefix = "voicelab-toy-"
    filename = "toy.sqlite3"


def _toy_outcome(path: Any, session_id: str) -> dict[str, Any] | None:
    return product_store.read_session(path, session_id, lambda db, plan, reminder: {
        "plan": plan["plan_text"] if plan else None,
        "reminder_time": reminder["time"] if reminder else None,
        "complete": product_store.report_fields_complete(plan, reminder)})


class ToyProbe(product_store.ProductProbe):
    read_outcome = staticmethod(_toy_outcome)


class ToyConnection(ProductConnection):
    """Answers every turn with two frames, a transcript and ``response.done``; a response
    whose number is in ``gates`` waits for that event first."""

    session_prefix = "toy"

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.started: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}

    def read_request(self, request: dict[str, Any]) -> str:
        return str(request.get("topic", "toy topic"))

    async def respond(self, number: int, user_turn: int, turn: Any, trigger_ns: int | None,
                      cancel: asyncio.Event) -> None:
        self.started.append(number)
        if number in self.gates:
            await self.gates[number].wait()
        response_id = f"resp_{number}"
        timing: dict[str, Any] = {"response_create_ns": trigger_ns, "first_audio_ns": None}
        if await self.stream_audio(number, [FRAME, FRAME], cancel, timing):
            await self.send_done(response_id, "cancelled", timing)
            return
        await self.finish(response_id, f"heard {len(turn)} bytes", timing)


class ToyServer(ProductServer):
    behaviour_model = ToyBehaviour
    store_class = ToyStore
    probe_class = ToyProbe
    database_dir_class = ToyDatabaseDir
    connection_class = ToyConnection
    label = "toy product"

    def new_record(self, ws: Any) -> SimpleNamespace:
        return SimpleNamespace(session_id=None, request=None, client_messages=[], violations=[],
                               responses_started=0, completed=False)


class StubSocket:
    """The server side of a connection: what was sent, how it was closed, what arrives."""

    def __init__(self, incoming: list[str | bytes] | None = None):
        self.incoming = list(incoming or [])
        self.sent: list[str | bytes] = []
        self.closed: tuple[int, str] | None = None

    async def send(self, payload: str | bytes) -> None:
        self.sent.append(payload)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def __aiter__(self) -> StubSocket:
        return self

    async def __anext__(self) -> str | bytes:
        if not self.incoming:
            raise StopAsyncIteration
        return self.incoming.pop(0)

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(payload) for payload in self.sent if isinstance(payload, str)]


def _connection(tmp_path, incoming: list[str | bytes] | None = None, **server_options: Any):
    server = ToyServer({"database_path": str(tmp_path / "toy.sqlite3")}, **server_options)
    server.store = ToyStore(server.database_path)
    record = server.new_record(None)
    return server, ToyConnection(server, StubSocket(incoming), record, server.store)


def _init(request: Any = None) -> str:
    body: dict[str, Any] = {"type": wire.INIT}
    if request is not ...:
        body["request"] = {} if request is None else request
    return json.dumps(body)


COMMIT = json.dumps({"type": wire.COMMIT})
CREATE = json.dumps({"type": wire.RESPONSE_CREATE})
CANCEL = json.dumps({"type": wire.RESPONSE_CANCEL})


@pytest.mark.parametrize(("messages", "code"), [
    ([FRAME], "init_required"),
    ([COMMIT], "init_required"),
    (["{not json"], "malformed_json"),
    ([_init(...)], "malformed_init"),
    ([_init(), _init()], "duplicate_init"),
    ([_init(), COMMIT], "empty_commit"),
    ([_init(), FRAME, CREATE], "create_without_commit"),
    ([_init(), b"\x00\x00\x00"], "invalid_audio"),
    ([_init(), json.dumps({"type": "session.update"})], "unknown_message_type"),
])
def test_a_protocol_violation_is_an_error_and_a_1008_close(tmp_path, messages, code):
    async def scenario() -> list[bool]:
        _, conn = _connection(tmp_path)
        results = [await conn.on_message(message, 0) for message in messages]
        assert conn.ws.closed == (VIOLATION_CLOSE_CODE, code)
        assert conn.ws.messages()[-1] == {"type": wire.ERROR, "error": {
            "code": code, "message": conn.ws.messages()[-1]["error"]["message"]}}
        assert conn.record.violations == [code]
        return results

    results = asyncio.run(scenario())
    assert results == [True] * (len(messages) - 1) + [False]


def test_a_turn_is_committed_answered_and_the_session_persisted(tmp_path):
    async def scenario() -> tuple[ToyServer, ToyConnection]:
        server, conn = _connection(tmp_path)
        for message in (_init({"session_id": "s1", "topic": "plans"}), FRAME, FRAME, COMMIT,
                        CREATE):
            assert await conn.on_message(message, 123)
        assert conn.response_task is not None
        await conn.response_task
        return server, conn

    server, conn = asyncio.run(scenario())
    assert (conn.session_id, conn.topic, conn.user_turns) == ("s1", "plans", 1)
    assert conn.record.responses_started == 1 and conn.record.session_id == "s1"
    assert conn.ws.sent[:2] == [FRAME, FRAME]
    transcript, done = conn.ws.messages()
    assert transcript == {"type": wire.TRANSCRIPT_DONE, "response_id": "resp_1",
                          "transcript": f"heard {2 * len(FRAME)} bytes"}
    assert done["response"] == {"id": "resp_1", "status": "completed"}
    assert done["server_timing"]["response_create_ns"] == 123
    assert done["server_timing"]["first_audio_ns"] is not None
    server.store.close()
    assert _toy_outcome(server.database_path, "s1") == {
        "plan": None, "reminder_time": None, "complete": False}


def test_a_session_id_falls_back_to_the_default_then_a_generated_one(tmp_path):
    async def session_id(**server_options: Any) -> str:
        _, conn = _connection(tmp_path, **server_options)
        await conn.on_message(_init(), 0)
        conn.store.close()
        return conn.session_id

    assert asyncio.run(session_id(default_session_id="trial-1")) == "trial-1"
    generated = asyncio.run(session_id())
    assert generated.startswith("toy-") and len(generated) == len("toy-") + 12


@pytest.mark.parametrize(("cancel_while_queued", "statuses"), [
    (False, ["cancelled", "completed"]),  # cancels the response that is playing
    (True, ["completed", "cancelled"]),  # cancels the newest, still waiting for its turn
])
def test_which_response_a_cancel_reaches(tmp_path, cancel_while_queued, statuses):
    async def scenario() -> list[str]:
        _, conn = _connection(tmp_path)
        conn.cancel_while_queued = cancel_while_queued
        gate = conn.gates[1] = asyncio.Event()
        for message in (_init(), FRAME, COMMIT, CREATE):
            await conn.on_message(message, 0)
        while conn.started != [1]:
            await asyncio.sleep(0)
        for message in (FRAME, COMMIT, CREATE, CANCEL):
            await conn.on_message(message, 0)
        gate.set()
        assert conn.response_task is not None
        await conn.response_task
        return [message["response"]["status"] for message in conn.ws.messages()
                if message["type"] == wire.RESPONSE_DONE]

    assert asyncio.run(scenario()) == statuses


def test_run_records_client_messages_until_a_violation(tmp_path):
    incoming: list[str | bytes] = [_init(), "{not json", COMMIT]

    async def scenario() -> ToyConnection:
        _, conn = _connection(tmp_path, incoming)
        await conn.run()
        return conn

    conn = asyncio.run(scenario())
    assert conn.record.client_messages == [wire.INIT, "malformed_json"]
    assert conn.ws.incoming == [COMMIT]  # not read after the close


def test_read_session_gives_the_latest_plan_and_reminder(tmp_path):
    path = tmp_path / "nested" / "toy.sqlite3"
    store = ToyStore(path)
    stamp = product_store.now()
    store.start_session("s1", "topic", {"b": 1})
    store.insert("plans", session_id="s1", turn_index=1, topic="t", plan_text="first",
                 recorded_at=stamp)
    assert store.insert("plans", session_id="s1", turn_index=2, topic="t", plan_text="second",
                        recorded_at=stamp) == 2
    store.insert("reminders", session_id="s1", text="call", time="16:00", created_at=stamp)
    store.start_session("s2", "topic", {})
    store.insert("plans", session_id="s2", turn_index=1, topic="t", plan_text="  ",
                 recorded_at=stamp)
    store.insert("reminders", session_id="s2", text="call", time="16:00", created_at=stamp)
    store.close()
    assert _toy_outcome(path, "s1") == {"plan": "second", "reminder_time": "16:00",
                                        "complete": True}
    assert _toy_outcome(path, "s2")["complete"] is False  # a blank plan text
    assert _toy_outcome(path, "unknown") is None
    assert _toy_outcome(tmp_path / "missing.sqlite3", "s1") is None
    outcome = asyncio.run(ToyProbe({"database_path": str(path)}).probe({"session_id": "s1"}))
    assert outcome is not None and outcome["plan"] == "second"


def test_the_temporary_database_outlives_the_server_while_its_probe_lives():
    server = ToyServer()
    probe = server.outcome_probe()
    directory = server.database_path.parent
    assert directory.name.startswith("voicelab-toy-")
    assert server.database_path.name == "toy.sqlite3"
    assert probe.database_path == server.database_path
    del server
    gc.collect()
    assert directory.is_dir()
    del probe
    gc.collect()
    assert not directory.exists()


def test_a_server_not_started_has_no_uri():
    with pytest.raises(RuntimeError, match="the toy product is not started"):
        _ = ToyServer().uri


def test_client_settings_split_from_the_behaviour():
    class ToySettings(ProductClientSettings, ToyBehaviour):
        behaviour_model = ToyBehaviour

    assert list(ToySettings.model_fields)[:len(ToyBehaviour.model_fields)] == list(
        ToyBehaviour.model_fields)
    settings = ToySettings(access_token="tok", chunk_ms=20, audio_pacing="realtime")
    client = settings.client("ws://127.0.0.1:1/")
    assert (client.uri, client.access_token, client.chunk_ms) == ("ws://127.0.0.1:1/", "tok", 20)
    behaviour = settings.behaviour()
    assert type(behaviour) is ToyBehaviour
    assert (behaviour.access_token, behaviour.audio_pacing) == ("tok", "realtime")


def test_settings_argument_reads_json_or_a_file(tmp_path):
    assert settings_argument(None) == {} and settings_argument("") == {}
    assert settings_argument('{"a": 1}') == {"a": 1}
    path = tmp_path / "settings.json"
    path.write_text('{"b": 2}', encoding="utf-8")
    assert settings_argument(f"@{path}") == {"b": 2}
    with pytest.raises(ValueError, match="must be a JSON object"):
        settings_argument("[1]")


@pytest.mark.parametrize(("settings", "says"), [
    ('{"nope": 1}', "unknown setting"),
    ("[1]", "--settings must be a JSON object"),
])
def test_the_standalone_entry_rejects_bad_settings_with_exit_2(capsys, settings, says):
    code = serve_product_main(["--settings", settings], product=ToyServer, name="toy",
                              prog="toy", description="A toy.", settings_help="JSON")
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("toy: ") and says in error


def test_the_database_path_flag_exists_only_when_asked(capsys):
    with pytest.raises(SystemExit):
        serve_product_main(["--database-path", "x.sqlite3"], product=ToyServer, name="toy",
                           prog="toy", description="A toy.", settings_help="JSON")
    assert "--database-path" in capsys.readouterr().err
    code = serve_product_main(["--database-path", "x.sqlite3", "--settings", "[1]"],
                              product=ToyServer, name="toy", prog="toy", description="A toy.",
                              settings_help="JSON", database_path_option=True)
    assert code == 2  # parsed; the settings are what failed
