"""Twilio Media Streams (``adapter: twilio``): voicelab plays Twilio's part to a bot.

The messages (:mod:`._wire`), the paced 8 kHz mu-law line (:mod:`._line`, which converts with
the shared :mod:`.._g711_line`) and the marks' playback clock (:mod:`._playback`) stay private
to this wire.
"""

from ._endpoint import TwilioEndpoint, TwilioSettings

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
