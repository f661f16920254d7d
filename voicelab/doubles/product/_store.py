"""What a local protocol-v1 product persists: a real SQLite file, and the probe that reads it.

Shared by the embedded fake product and the local demo agent; each says what it stores (its
schema and inserts) and what its outcome is. The runner closes the endpoint before it probes,
so the database outlives the connection: a temporary directory is removed when the last object
holding it is collected (or at exit).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import Field, JsonValue

from ...endpoints._settings import AdapterSettings, parse_settings

Outcome = TypeVar("Outcome")
#: what a product's probe reads of a session (its persisted fields)
ProductOutcome = dict[str, JsonValue]

SESSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    request_json TEXT NOT NULL,
    started_at TEXT NOT NULL
);
"""


class ProductDatabaseDir:
    """A temporary directory for one product's database, removed when unreferenced."""

    prefix: ClassVar[str] = "voicelab-product-"
    filename: ClassVar[str] = "product.sqlite3"

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=self.prefix))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    @property
    def database_path(self) -> Path:
        return self.path / self.filename


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class ProductStore:
    """A product's SQLite database: ``sessions`` plus the tables of :attr:`schema`.

    Durable across ``close()`` and processes, but no fsync per write (that would make every
    local conversation pay a disk flush).
    """

    schema: ClassVar[str] = ""  # the product's own tables, created after ``sessions``
    pragmas: ClassVar[tuple[str, ...]] = ("PRAGMA synchronous=OFF",)

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        for pragma in self.pragmas:
            self._db.execute(pragma)
        self._db.executescript(SESSIONS_TABLE + self.schema)

    def start_session(self, session_id: str, topic: str, request: Mapping[str, object]) -> None:
        self._db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?)",
                         (session_id, topic, json.dumps(dict(request), default=str), now()))

    def insert(self, table: str, **values: str | int | float | None) -> int:
        """Insert one row (its time column filled by the caller); the new row's id."""
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cursor = self._db.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})",
                                  tuple(values.values()))
        return int(cursor.lastrowid or 0)

    def close(self) -> None:
        self._db.close()


def read_session(path: str | Path, session_id: str, outcome: Callable[
        [sqlite3.Connection, sqlite3.Row | None, sqlite3.Row | None], Outcome]) -> Outcome | None:
    """``outcome(db, plan, reminder)`` on a read-only connection (rows as :class:`sqlite3.Row`),
    given the session's latest ``plans`` and ``reminders`` rows (``None`` when there is none);
    ``None`` when the database does not exist or the product never saw ``session_id``."""
    path = Path(path)
    if not path.is_file():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        if db.execute("SELECT 1 FROM sessions WHERE session_id = ?",
                      (session_id,)).fetchone() is None:
            return None
        return outcome(db, _latest_row(db, "plans", session_id),
                       _latest_row(db, "reminders", session_id))
    finally:
        db.close()


def _latest_row(db: sqlite3.Connection, table: str, session_id: str) -> sqlite3.Row | None:
    return db.execute(f"SELECT * FROM {table} WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                      (session_id,)).fetchone()


def report_fields_complete(plan: sqlite3.Row | None, reminder: sqlite3.Row | None) -> bool:
    """The follow-up report is complete: a plan (topic, text) and a reminder (text, time)."""
    fields = [plan["topic"], plan["plan_text"]] if plan else []
    fields += [reminder["text"], reminder["time"]] if reminder else []
    return len(fields) == 4 and all(str(value).strip() for value in fields)


class ProductProbeSettings(AdapterSettings):
    database_path: str = Field(min_length=1)


class ProductProbe:
    """An `OutcomeProbe` reading a product's SQLite database after the conversation.

    ``probe(context)`` returns :meth:`read_outcome` for ``context["session_id"]``.
    """

    settings_model = ProductProbeSettings

    def __init__(self, settings: Mapping[str, object], *, keep_alive: object = None):
        self._settings = parse_settings(ProductProbeSettings, settings)
        self._keep_alive = keep_alive  # the temporary directory must outlive the endpoint

    @property
    def database_path(self) -> Path:
        return Path(self._settings.database_path)

    @staticmethod
    def read_outcome(path: str | Path, session_id: str) -> ProductOutcome | None:
        raise NotImplementedError

    async def probe(self, context: Mapping[str, object]) -> ProductOutcome | None:
        # read on the loop: a double's local database answers in ~0.15 ms, less than handing
        # the read to a thread costs a busy loop (its GIL hand-offs delay every arrival stamp)
        return self.read_outcome(self.database_path, str(context["session_id"]))
