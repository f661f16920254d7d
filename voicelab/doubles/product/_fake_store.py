"""The fake product's persisted state (a real SQLite file) and the outcome probe that reads it.

The runner closes the endpoint before it probes, so the database outlives the connection (see
:mod:`._store`, which this specializes: the tables and the outcome).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ._store import (
    ProductDatabaseDir,
    ProductOutcome,
    ProductProbe,
    ProductStore,
    now,
    read_session,
    report_fields_complete,
)

SCHEMA = """
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


class TemporaryDatabaseDir(ProductDatabaseDir):
    """A temporary directory for one fake product's database, removed when unreferenced."""

    prefix = "voicelab-fake-product-"
    filename = "fake-product.sqlite3"


class FakeStore(ProductStore):
    """Sessions, recorded plans and saved reminders of the fake product."""

    schema = SCHEMA
    # a test double's database: no journal file either
    pragmas = ("PRAGMA synchronous=OFF", "PRAGMA journal_mode=MEMORY")

    def record_plan(self, session_id: str, *, turn_index: int, topic: str, plan_text: str,
                    audio_ms: int) -> int:
        return self.insert("plans", session_id=session_id, turn_index=turn_index, topic=topic,
                           plan_text=plan_text, audio_ms=audio_ms, recorded_at=now())

    def save_reminder(self, session_id: str, *, text: str, time: str) -> int:
        return self.insert("reminders", session_id=session_id, text=text, time=time,
                           created_at=now())


def read_outcome(path: str | Path, session_id: str) -> ProductOutcome | None:
    """The persisted outcome of ``session_id``; ``None`` when the product never saw the session."""

    def outcome(db: sqlite3.Connection, plan: sqlite3.Row | None,
                reminder: sqlite3.Row | None) -> ProductOutcome:
        return {
            "session_id": session_id,
            "follow_up_created": reminder is not None,
            "report_fields_complete": report_fields_complete(plan, reminder),
            "reminder_created": reminder is not None,
            "reminder_time": reminder["time"] if reminder else None,
        }

    return read_session(path, session_id, outcome)


class FakeProductProbe(ProductProbe):
    """The fake product's `OutcomeProbe`: reads its SQLite database after the conversation.

    ``FakeProductProbe({"database_path": ...})``; ``probe(context)`` returns
    ``follow_up_created``, ``report_fields_complete``, ``reminder_created`` and ``reminder_time``
    for ``context["session_id"]`` (``None`` when the session is unknown).
    """

    read_outcome = staticmethod(read_outcome)
