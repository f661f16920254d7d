"""A voice bot served over WebRTC (the test double of ``adapter: webrtc``): the three
signalling contracts (pipecat's SmallWebRTC, WHIP, fastrtc), Opus both ways, RTVI messages on
the data channel, and its RTP send stamps as truth. Run it on its own with
``python -m voicelab.doubles.webrtc --port 7860 --settings '{"rtvi": true}'``.
"""

from ._bot import WebRtcBot
from ._call import CallRecord, ReplyRecord
from ._settings import WebRtcBotSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
