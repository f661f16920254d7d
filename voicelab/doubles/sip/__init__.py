"""A SIP product double: an IVR front and a speaking agent behind a SIP user agent server.

:class:`SipDouble` answers calls on 127.0.0.1 over UDP and TCP as a product would (RFC 3261:
INVITE, 100/180 or 183 with early media, 200 with an SDP answer, ACK, BYE either way, CANCEL,
keys by RFC 4733 and SIP INFO) with RTP both ways in 20 ms G.711 packets. ``mode: ivr`` plays
menus that keys move through (a key while a prompt plays stops it) and then the agent;
``mode: agent`` is the agent alone: it greets, answers each caller utterance, stops when
talked over. Failing and hostile modes (a final status, no answer, digest authentication, no
media, hang-up, hold, RTP flood, foreign RTP, a huge SDP, key and BYE storms) test a client.

It is written from the RFCs, independently of voicelab's SIP client, so the two check each
other; every thing it does is reported with its own ``time.perf_counter_ns`` stamps. Run it on
its own with ``python -m voicelab.doubles.sip --settings '{"mode": "agent"}'``.
"""

from ._server import SipDouble
from ._settings import AGENT, AuthSettings, Menu, SipDoubleSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
