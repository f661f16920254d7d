"""Twilio Media Streams (``adapter: twilio``): voicelab plays Twilio's part to a bot.

The messages (:mod:`._wire`), the paced 8 kHz mu-law line (:mod:`._line`, which converts with
the shared :mod:`.._g711_line`) and the marks' playback clock (:mod:`._playback`) stay private
to this wire.
"""

from ._endpoint import TwilioEndpoint, TwilioSettings

__all__ = ["TwilioEndpoint", "TwilioSettings"]
