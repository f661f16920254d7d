"""The one mapping from how a WebSocket ended to the error event both adapters report."""

from __future__ import annotations

import pytest

from voicelab.endpoints._socket import Closure, closure_error


@pytest.mark.parametrize(("closure", "mid_turn", "expected"), [
    (Closure(1009, "too big", local_failure=True), False, "message_too_large"),
    (Closure(1007, "invalid utf-8", local_failure=True), False, "protocol_error"),
    (Closure(1011, "keepalive ping timeout", local_failure=True), False, "protocol_error"),
    (Closure(1006, "connection lost without a close frame"), False, "connection_lost"),
    (Closure(1011, "server error"), False, "connection_closed"),
    (Closure(1009, "your message was too big"), True, "connection_closed"),
    (Closure(1000, "bye"), True, "closed_mid_turn"),
    (Closure(1001, "going away"), True, "closed_mid_turn"),
    (Closure(1000, "bye"), False, None),
    (Closure(1001, "going away"), False, None),
])
def test_each_closure_maps_to_one_error_code(closure, mid_turn, expected):
    error = closure_error(closure, reason=closure.reason, mid_turn=mid_turn,
                          max_message_bytes=4096)
    assert (error.code if error else None) == expected


def test_the_messages_name_the_limit_and_the_code():
    too_big = closure_error(Closure(1009, "", local_failure=True), reason="", mid_turn=False,
                            max_message_bytes=4096)
    assert too_big is not None and "4096 bytes" in too_big.message
    closed = closure_error(Closure(4000, "x"), reason="[scrubbed]", mid_turn=False,
                           max_message_bytes=4096)
    assert closed is not None and closed.message == \
        "product closed the connection (code 4000: [scrubbed])"
