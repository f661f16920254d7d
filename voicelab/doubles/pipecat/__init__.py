"""A pipecat-protocol bot on 127.0.0.1 (``adapter: pipecat``; ``python -m voicelab.doubles.pipecat``).

It speaks pipecat's protobuf frames over a WebSocket as a bot served with pipecat's WebSocket
transport and ``ProtobufFrameSerializer`` does, and takes turns by listening. See
``docs/adapters/pipecat.md``.
"""

from ._bot import BotCall, PipecatBot, PipecatBotSettings, ReplyTiming

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
