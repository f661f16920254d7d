"""Phone calls over SIP (``adapter: sip``): voicelab dials the product and talks over RTP.

The SIP user agent, SDP, digest authentication, RTP and RFC 4733 keys (:mod:`._call` and the
modules it uses) stay private to this wire; the 8 kHz G.711 conversion is the phone wire's
shared one (:mod:`.._g711_line`), and Opus is libopus from the optional ``telephony`` extra.
"""

from ._endpoint import SipEndpoint
from ._settings import SipSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
