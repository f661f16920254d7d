"""The demo agent's persisted state (a real SQLite file) and the outcome probe that reads it.

The runner closes the endpoint before it probes, so the database outlives the connection (see
the product base's store in :mod:`voicelab.doubles.product`, which this specializes: the tables
and the outcome).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..product._store import (
    ProductDatabaseDir,
    ProductOutcome,
    ProductProbe,
    ProductStore,
    now,
    read_session,
    report_fields_complete,
)

HEARD_SEPARATOR = " | "

SCHEMA = """
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


class TemporaryDatabaseDir(ProductDatabaseDir):
    """A temporary directory for one agent's database, removed when unreferenced."""

    prefix = "voicelab-demo-agent-"
    filename = "demo-agent.sqlite3"


class AgentStore(ProductStore):
    """Sessions, what the agent heard, recorded plans and saved reminders."""

    schema = SCHEMA

    def record_utterance(self, session_id: str, *, turn_index: int, heard_text: str,
                         audio_ms: int) -> None:
        self.insert("utterances", session_id=session_id, turn_index=turn_index,
                    heard_text=heard_text, audio_ms=audio_ms, recognized_at=now())

    def record_plan(self, session_id: str, *, turn_index: int, topic: str,
                    plan_text: str) -> int:
        return self.insert("plans", session_id=session_id, turn_index=turn_index, topic=topic,
                           plan_text=plan_text, recorded_at=now())

    def save_reminder(self, session_id: str, *, text: str, time: str, time_source: str) -> int:
        return self.insert("reminders", session_id=session_id, text=text, time=time,
                           time_source=time_source, created_at=now())


def read_outcome(path: str | Path, session_id: str) -> ProductOutcome | None:
    """The persisted outcome of ``session_id``; ``None`` when the agent never saw the session."""

    def outcome(db: sqlite3.Connection, plan: sqlite3.Row | None,
                reminder: sqlite3.Row | None) -> ProductOutcome:
        heard = [row["heard_text"] for row in db.execute(
            "SELECT heard_text FROM utterances WHERE session_id = ? ORDER BY id", (session_id,))]
        return {
            "session_id": session_id,
            "plan_recorded": plan is not None,
            "reminder_created": reminder is not None,
            "reminder_time": reminder["time"] if reminder else None,
            "reminder_time_source": reminder["time_source"] if reminder else None,
            "heard_text": HEARD_SEPARATOR.join(heard),
            "follow_up_created": reminder is not None,
            "report_fields_complete": report_fields_complete(plan, reminder),
        }

    return read_session(path, session_id, outcome)


class LocalAgentProbe(ProductProbe):
    """The demo agent's `OutcomeProbe`: reads its SQLite database after the conversation.

    ``LocalAgentProbe({"database_path": ...})``; ``probe({"session_id": ...})`` returns
    ``plan_recorded``, ``reminder_created``, ``reminder_time``, ``reminder_time_source``
    (``speech`` or ``request``), ``heard_text`` (what the agent recognized, user turns joined by
    " | "), ``follow_up_created`` and ``report_fields_complete``; ``None`` for an unknown
    session.
    """

    read_outcome = staticmethod(read_outcome)
