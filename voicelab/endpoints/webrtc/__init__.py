"""WebRTC (``adapter: webrtc``): voicelab as a WebRTC peer of a voice agent, reached by
pipecat's SmallWebRTC signalling, WHIP or fastrtc, Opus both ways through aiortc
(``voicelab[webrtc]``), every RTP packet stamped where it arrives and leaves.

The signalling (:mod:`._signalling`), the paced line (:mod:`._line`), the RTP arrival seam
(:mod:`._rtp`), Opus (:mod:`._opus`), RTVI (:mod:`._rtvi`) and aiortc's peer (:mod:`._peer`)
stay private to this wire; :func:`gathering_on` is public so a WebRTC product on this machine
(the test double) gathers its candidates on loopback the same way.
"""

from ._endpoint import WebRtcEndpoint
from ._ice import gathering_on
from ._settings import IceServer, WebRtcLimits, WebRtcSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
