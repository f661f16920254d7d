"""A pipecat-protocol bot on 127.0.0.1 (``adapter: pipecat``; ``python -m voicelab.doubles.pipecat``).

It speaks pipecat's protobuf frames over a WebSocket as a bot served with pipecat's WebSocket
transport and ``ProtobufFrameSerializer`` does, and takes turns by listening. See
``docs/adapters/pipecat.md``.
"""

from ._bot import BotCall, PipecatBot, PipecatBotSettings, ReplyTiming

__all__ = ["BotCall", "PipecatBot", "PipecatBotSettings", "ReplyTiming"]
