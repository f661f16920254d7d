"""The fake product's persisted state (a real SQLite file) and the outcome probe that reads it.

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

from pydantic import Field

from ._settings import AdapterSettings, parse_settings

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    request_json TEXT NOT NULL,
    started_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS plans (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    topic TEXT NOT NULL,
    plan_text TEXT NOT NULL,
    audio_ms INTEGER NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reminders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,
    time TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


class TemporaryDatabaseDir:
    """A temporary directory for one fake product's database, removed when unreferenced."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="voicelab-fake-product-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    @property
    def database_path(self) -> Path:
        return self.path / "fake-product.sqlite3"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class FakeStore:
    """Sessions, recorded plans and saved reminders of the fake product."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        # A test double's database: durable across close() and processes, but no fsync per
        # write (that would make every fake conversation pay a disk flush).
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("PRAGMA journal_mode=MEMORY")
        self._db.executescript(SCHEMA)

    def start_session(self, session_id: str, topic: str, request: Mapping[str, Any]) -> None:
        self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                         (session_id, topic, json.dumps(dict(request), default=str), _now()))

    def record_plan(self, session_id: str, *, turn_index: int, topic: str, plan_text: str,
                    audio_ms: int) -> int:
        cursor = self._db.execute(
            "INSERT INTO plans (session_id, turn_index, topic, plan_text, audio_ms, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?)", (session_id, turn_index, topic, plan_text, audio_ms,
                                          _now()))
        return int(cursor.lastrowid or 0)

    def save_reminder(self, session_id: str, *, text: str, time: str) -> int:
        cursor = self._db.execute(
            "INSERT INTO reminders (session_id, text, time, created_at) VALUES (?, ?, ?, ?)",
            (session_id, text, time, _now()))
        return int(cursor.lastrowid or 0)

    def close(self) -> None:
        self._db.close()


def read_outcome(path: str | Path, session_id: str) -> dict[str, Any] | None:
    """The persisted outcome of ``session_id``; ``None`` when the product never saw the session."""
    path = Path(path)
    if not path.is_file():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        session = db.execute("SELECT * FROM sessions WHERE session_id = ?",
                             (session_id,)).fetchone()
        if session is None:
            return None
        plan = db.execute("SELECT * FROM plans WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                          (session_id,)).fetchone()
        reminder = db.execute("SELECT * FROM reminders WHERE session_id = ? ORDER BY id DESC "
                              "LIMIT 1", (session_id,)).fetchone()
    db.close()
    report_fields = [plan["topic"], plan["plan_text"]] if plan else []
    report_fields += [reminder["text"], reminder["time"]] if reminder else []
    return {
        "session_id": session_id,
        "follow_up_created": reminder is not None,
        "report_fields_complete": len(report_fields) == 4 and all(
            str(value).strip() for value in report_fields),
        "reminder_created": reminder is not None,
        "reminder_time": reminder["time"] if reminder else None,
    }


class FakeProductProbeSettings(AdapterSettings):
    database_path: str = Field(min_length=1)


class FakeProductProbe:
    """The fake product's `OutcomeProbe`: reads its SQLite database after the conversation.

    ``FakeProductProbe({"database_path": ...})``; ``probe(context)`` returns
    ``follow_up_created``, ``report_fields_complete``, ``reminder_created`` and ``reminder_time``
    for ``context["session_id"]`` (``None`` when the session is unknown).
    """

    def __init__(self, settings: Mapping[str, Any], *, keep_alive: object = None):
        self._settings = parse_settings(FakeProductProbeSettings, settings)
        self._keep_alive = keep_alive  # the temporary directory must outlive the endpoint

    @property
    def database_path(self) -> Path:
        return Path(self._settings.database_path)

    async def probe(self, context: Mapping[str, Any]) -> Mapping[str, Any] | None:
        session_id = str(context["session_id"])
        return await asyncio.to_thread(read_outcome, self.database_path, session_id)
