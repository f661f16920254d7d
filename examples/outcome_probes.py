"""Outcome probes for your own product: what a conversation left in your database or your API.

After each conversation (the connection is closed by then) voicelab calls the run's outcome
probe with the trial's ``session_id`` (and ``data``, ``scenario_id``, ``trial_index``,
``seed``); the values it returns are compared with the scenario's ``eval_spec.outcome_spec``
(``outcome_<key>`` verdicts). Returning ``None`` says the product has no record of the session
(the verdicts fail: "no record"). Name a class here from the run file (this folder is
importable)::

    outcome_probe:
      probe: outcome_probes.SqlOutcomeProbe
      settings: {database: /var/lib/my-agent/app.sqlite3, query: "SELECT ...", booleans: [...]}

Each declares its settings as a pydantic model (``settings_model``, ``extra="forbid"``):
``voice-evaluator validate`` checks ``outcome_probe.settings`` with it before any call, so a
typo (``databse:``) is exit 2 naming the run file and the key, not a failed outcome verdict in
every trial. Both are tested (tests/integration/test_outcome_probe_examples.py) against the fake
product, which persists to a real SQLite file, and a small HTTP API in front of that file.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from voicelab.config import parse_settings

#: Where the run file keeps these settings (named in every settings error).
SETTINGS_KEY = "outcome_probe.settings"


class SqlProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    database: str = Field(min_length=1)
    query: str
    booleans: list[str] = []

    @field_validator("query")
    @classmethod
    def _keyed_by_session(cls, query: str) -> str:
        if ":session_id" not in query:
            raise ValueError("must use the parameter :session_id")
        return query


class SqlOutcomeProbe:
    """One row of a SQL query, keyed by column name, for the trial's session.

    ``settings``: ``database`` (a SQLite file, opened read-only), ``query`` (its parameter
    ``:session_id``; no row: no record), ``booleans`` (columns that are 0/1 in SQL and
    ``true``/``false`` in the outcome spec). For PostgreSQL or MySQL, keep the shape and open
    the connection with your driver instead of ``sqlite3``.
    """

    settings_model = SqlProbeSettings

    def __init__(self, settings: Mapping[str, Any]):
        parsed = parse_settings(SqlProbeSettings, settings, key=SETTINGS_KEY)
        self.database, self.query, self.booleans = parsed.database, parsed.query, parsed.booleans

    def _read(self, session_id: str) -> dict[str, Any] | None:
        connection = sqlite3.connect(f"file:{quote(self.database)}?mode=ro", uri=True)
        try:
            connection.row_factory = sqlite3.Row
            row = connection.execute(self.query, {"session_id": session_id}).fetchone()
        finally:
            connection.close()
        if row is None:
            return None
        values = dict(row)
        for column in self.booleans:
            if values.get(column) is not None:
                values[column] = bool(values[column])
        return values

    async def probe(self, context: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # a database may be slow: the read runs in a thread, never on the event loop that
        # stamps the other trials' audio
        return await asyncio.to_thread(self._read, str(context["session_id"]))


class HttpProbeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1)
    headers: dict[str, str] = {}
    timeout_seconds: float = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _names_the_session(cls, url: str) -> str:
        if "{session_id}" not in url:
            raise ValueError("must contain {session_id}")
        return url


class HttpOutcomeProbe:
    """Your API's JSON object for the trial's session.

    ``settings``: ``url`` with ``{session_id}`` in it (URL-encoded when filled in), ``headers``
    (e.g. ``Authorization: Bearer ${MY_API_TOKEN}``: interpolated from the environment, masked
    in every artifact), ``timeout_seconds`` (default 10). A 404 is no record; another error
    status fails the trial's execution with the status in the message.
    """

    settings_model = HttpProbeSettings

    def __init__(self, settings: Mapping[str, Any]):
        parsed = parse_settings(HttpProbeSettings, settings, key=SETTINGS_KEY)
        self.url, self.headers = parsed.url, parsed.headers
        self.timeout_seconds = parsed.timeout_seconds

    async def probe(self, context: Mapping[str, Any]) -> Mapping[str, Any] | None:
        import httpx

        url = self.url.replace("{session_id}", quote(str(context["session_id"]), safe=""))
        async with httpx.AsyncClient(timeout=self.timeout_seconds) as client:
            response = await client.get(url, headers=self.headers)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        document = response.json()
        if not isinstance(document, dict):
            raise ValueError(f"expected a JSON object from the outcome API, got "
                             f"{type(document).__name__}")
        return document
