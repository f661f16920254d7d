"""How a trial's conversation ends in failure, and how its call is closed: the ``Failure`` and
``ConversationEnded`` that carry an exit reason out of the loop, the checks of what the product
sent (its errors, a closed connection, an audio flood, nothing while a response was due), and the
shutdown that closes the endpoint, the event pump, the persona and the telephony lines. It is a
base of :class:`~._conversation.Conversation`, kept apart from the turn loop, which reaches it
only through ``ConversationEnded``, ``Failure``, ``_check_product_failures``,
``_closed_or_error``, ``_no_response``, ``_scrub`` and ``shutdown``; the attributes it reads are
the conversation's, declared here for the type checker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ..recording import EventType, ProductClosed, ProductError, Recording
from ._channel import ToProductLine, ToUserLine, record_line_stats
from ._heard_speech import HeardSpeech
from ._intake import Intake

#: Adapter error codes that only describe how the connection ended (exit ``connection_closed``).
CLOSURE_CODES = frozenset({"connection_closed", "closed_mid_turn", "connection_lost"})


@dataclass
class Failure:
    kind: str
    message: str
    code: str | None = None


def _hashable(value: object) -> object:
    """A product's value as a set member (an unhashable one is no member of any)."""
    return value if isinstance(value, Hashable) else None


class ConversationEnded(Exception):
    def __init__(self, exit_reason: str, failure: Failure | None = None):
        self.exit_reason = exit_reason
        self.failure = failure
        super().__init__(exit_reason)


class ConversationEnd:
    """A conversation's failure checks and its shutdown (see the module docstring)."""

    endpoint: Any
    persona: Any
    recording: Recording
    scrubber: Any
    first_speaker: str
    response_timeout_seconds: float
    intake: Intake
    failures: list[Failure]
    product_line: ToProductLine | None
    to_user_line: ToUserLine | None
    heard_speech: HeardSpeech | None
    _pump: asyncio.Task[None] | None

    def _product_errors(self) -> list[ProductError]:
        """Errors other than the adapter's own report of a closed connection."""
        errors = [ProductError.of(e) for e in self.intake.errors]
        return [e for e in errors
                if not (e.origin == "adapter" and _hashable(e.code) in CLOSURE_CODES)]

    def _closed_or_error(self) -> str:
        return "error" if self._product_errors() else "connection_closed"

    def _check_product_failures(self) -> None:
        intake = self.intake
        if intake.flood is not None:
            raise ConversationEnded("error", Failure("endpoint", intake.flood, "audio_flood"))
        errors = self._product_errors()
        if errors:
            error = errors[0]
            raise ConversationEnded("error", Failure(
                "endpoint", self._scrub(f"product error {error.code}: {error.message}"),
                str(error.code)))
        if intake.ended and not intake.conversation_complete:
            closure = next((error for error in (ProductError.of(e) for e in intake.errors)
                            if error.message), None)
            reason = ProductClosed.of(intake.closed).reason if intake.closed is not None \
                else "event stream ended"
            detail = closure.message if closure else reason
            # the failure code is the adapter's error code (closed_mid_turn, connection_lost...);
            # the WebSocket close code is in the closed event itself
            raise ConversationEnded("connection_closed", Failure(
                "endpoint", self._scrub(f"connection closed before the conversation completed "
                                        f"({detail})"),
                str(closure.code) if closure and closure.code else "connection_closed"))

    def _no_response(self, target_turn: str) -> Failure:
        seconds = f"{self.response_timeout_seconds:g} s"
        if target_turn == "turn-000" and self.first_speaker == "product" \
                and not self.intake.responses:
            return Failure("timeout", f"the product did not speak first within {seconds} "
                           f"(scenario conversation.first_speaker: product); if it waits for "
                           f"the user, set first_speaker: user (or auto)", "response_timeout")
        return Failure("timeout", f"the product sent nothing for {seconds} while a response "
                       f"was due", "response_timeout")

    async def shutdown(self) -> None:
        """Close the endpoint and the persona; failures here are cleanup failures."""
        try:
            await asyncio.wait_for(self.endpoint.close(), 10)
        except Exception as error:  # noqa: BLE001 - any close failure is recorded, not raised
            self.failures.append(Failure("cleanup", self._scrub(f"closing the endpoint failed: "
                                                                f"{type(error).__name__}: {error}")))
        self.recording.record(EventType.CLOSED_BY_EVALUATOR, source="evaluator",
                              direction="outbound")
        interrupted = False
        if self._pump is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._pump), 1.0)
            except (TimeoutError, asyncio.CancelledError):
                self._pump.cancel()
                me = asyncio.current_task()
                # the run is being interrupted: finish closing, then say so (never absorb it)
                interrupted = me is not None and me.cancelling() > 0
            except Exception as error:  # noqa: BLE001
                self.failures.append(Failure("endpoint", self._scrub(
                    f"the endpoint's event stream failed: {type(error).__name__}: {error}")))
        try:
            await self.persona.close()
        except Exception as error:  # noqa: BLE001
            self.failures.append(Failure("cleanup", self._scrub(
                f"closing the persona failed: {type(error).__name__}: {error}")))
        self._close_line()
        if interrupted:
            raise asyncio.CancelledError

    def _close_line(self) -> None:
        """The rest of what the user heard through the line, and both lines' packet counts."""
        recording = self.recording
        if self.product_line is not None:
            line = self.product_line
            record_line_stats(recording, "to_product", line.config, line.stats(),
                              codec=line.codec)
        if self.to_user_line is not None and self.heard_speech is not None:
            end = max(recording.timeline.cursor_ns, recording.listener_now_ns())
            heard = self.to_user_line
            self.heard_speech.listen_until(end + heard.lag_ns)
            record_line_stats(recording, "to_user", heard.config, heard.stats(), codec=heard.codec)

    def _scrub(self, text: str) -> str:
        return self.scrubber.scrub_text(text) if self.scrubber is not None else text
