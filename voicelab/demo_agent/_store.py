"""The demo agent's persisted state (a real SQLite file) and the outcome probe that reads it.

The runner closes the endpoint before it probes, so the database outlives the connection: a
temporary directory is removed when the last object holding it is collected (or at exit).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..endpoints._settings import parse_settings

HEARD_SEPARATOR = " | "

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    request_json TEXT NOT NULL,
    started_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS utterances (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    heard_text TEXT NOT NULL,
    audio_ms INTEGER NOT NULL,
    recognized_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS plans (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    topic TEXT NOT NULL,
    plan_text TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reminders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,
    time TEXT NOT NULL,
    time_source TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


class TemporaryDatabaseDir:
    """A temporary directory for one agent's database, removed when unreferenced."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="voicelab-demo-agent-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    @property
    def database_path(self) -> Path:
        return self.path / "demo-agent.sqlite3"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class AgentStore:
    """Sessions, what the agent heard, recorded plans and saved reminders."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA synchronous=OFF")  # a demo's database: no fsync per write
        self._db.executescript(SCHEMA)

    def start_session(self, session_id: str, topic: str, request: Mapping[str, Any]) -> None:
        self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                         (session_id, topic, json.dumps(dict(request), default=str), _now()))

    def record_utterance(self, session_id: str, *, turn_index: int, heard_text: str,
                         audio_ms: int) -> None:
        self._db.execute(
            "INSERT INTO utterances (session_id, turn_index, heard_text, audio_ms, recognized_at)"
            " VALUES (?, ?, ?, ?, ?)", (session_id, turn_index, heard_text, audio_ms, _now()))

    def record_plan(self, session_id: str, *, turn_index: int, topic: str,
                    plan_text: str) -> int:
        cursor = self._db.execute(
            "INSERT INTO plans (session_id, turn_index, topic, plan_text, recorded_at) "
            "VALUES (?, ?, ?, ?, ?)", (session_id, turn_index, topic, plan_text, _now()))
        return int(cursor.lastrowid or 0)

    def save_reminder(self, session_id: str, *, text: str, time: str, time_source: str) -> int:
        cursor = self._db.execute(
            "INSERT INTO reminders (session_id, text, time, time_source, created_at) "
            "VALUES (?, ?, ?, ?, ?)", (session_id, text, time, time_source, _now()))
        return int(cursor.lastrowid or 0)

    def close(self) -> None:
        self._db.close()


def read_outcome(path: str | Path, session_id: str) -> dict[str, Any] | None:
    """The persisted outcome of ``session_id``; ``None`` when the agent never saw the session."""
    path = Path(path)
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        if db.execute("SELECT 1 FROM sessions WHERE session_id = ?",
                      (session_id,)).fetchone() is None:
            return None
        heard = [row["heard_text"] for row in db.execute(
            "SELECT heard_text FROM utterances WHERE session_id = ? ORDER BY id", (session_id,))]
        plan = db.execute("SELECT * FROM plans WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                          (session_id,)).fetchone()
        reminder = db.execute("SELECT * FROM reminders WHERE session_id = ? ORDER BY id DESC "
                              "LIMIT 1", (session_id,)).fetchone()
    finally:
        db.close()
    report_fields = [plan["topic"], plan["plan_text"]] if plan else []
    report_fields += [reminder["text"], reminder["time"]] if reminder else []
    return {
        "session_id": session_id,
        "plan_recorded": plan is not None,
        "reminder_created": reminder is not None,
        "reminder_time": reminder["time"] if reminder else None,
        "reminder_time_source": reminder["time_source"] if reminder else None,
        "heard_text": HEARD_SEPARATOR.join(heard),
        "follow_up_created": reminder is not None,
        "report_fields_complete": len(report_fields) == 4 and all(
            str(value).strip() for value in report_fields),
    }


class LocalAgentProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database_path: str = Field(min_length=1)


class LocalAgentProbe:
    """The demo agent's `OutcomeProbe`: reads its SQLite database after the conversation.

    ``LocalAgentProbe({"database_path": ...})``; ``probe({"session_id": ...})`` returns
    ``plan_recorded``, ``reminder_created``, ``reminder_time``, ``reminder_time_source``
    (``speech`` or ``request``), ``heard_text`` (what the agent recognized, user turns joined by
    " | "), ``follow_up_created`` and ``report_fields_complete``; ``None`` for an unknown
    session.
    """

    def __init__(self, settings: Mapping[str, Any], *, keep_alive: object = None):
        self._settings = parse_settings(LocalAgentProbeSettings, settings)
        self._keep_alive = keep_alive  # the temporary directory must outlive the endpoint

    @property
    def database_path(self) -> Path:
        return Path(self._settings.database_path)

    async def probe(self, context: Mapping[str, Any]) -> Mapping[str, Any] | None:
        session_id = str(context["session_id"])
        return await asyncio.to_thread(read_outcome, self.database_path, session_id)
