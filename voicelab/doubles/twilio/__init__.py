"""A voice bot behind Twilio Media Streams (the test double of ``adapter: twilio``).

:class:`TwilioBot` is the WebSocket server a ``<Connect><Stream>`` points Twilio at: it listens
to the user with voice activity detection, answers in tone speech, marks its answers, clears
them when the user speaks over it, and records every call (:class:`CallRecord`). Run it on its
own with ``python -m voicelab.doubles.twilio --port 8765 --settings '{"burst": true}'``.
"""

from ._bot import TwilioBot
from ._records import CallRecord, ReplyRecord
from ._settings import TwilioBotSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
