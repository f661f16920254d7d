"""Test doubles: everything that imitates something else for tests and demos, on 127.0.0.1.

One subpackage per thing imitated, each re-exporting its public names:

* :mod:`voicelab.doubles.product`: a protocol-v1 voice product. The shared product server base
  (strict protocol state machine, SQLite store, outcome probe, standalone entry), the scripted
  fake product (``adapter: fake``; ``python -m voicelab.doubles.product``) and its HTTP twin.
* :mod:`voicelab.doubles.demo_agent`: a real local speech agent built on that base
  (``adapter: local_agent``; ``python -m voicelab.doubles.demo_agent``).
* :mod:`voicelab.doubles.openai`: an OpenAI-compatible chat / Evals server with a rule engine.
* :mod:`voicelab.doubles.azure_tts`: the Azure Speech text-to-speech REST service.
* :mod:`voicelab.doubles.realtime`: the OpenAI Realtime / Azure Voice Live event protocol.
* :mod:`voicelab.doubles.twilio`: a bot behind Twilio Media Streams (listens by voice activity,
  marks its replies, clears on barge-in; ``python -m voicelab.doubles.twilio``).
* :mod:`voicelab.doubles.pipecat`: a pipecat bot behind its protobuf WebSocket serializer
  (listens by voice activity, transcribes, stops when talked over;
  ``python -m voicelab.doubles.pipecat``).
* :mod:`voicelab.doubles.sip`: a phone product reached by a SIP call (an IVR menu answered by
  keys in front of a speaking agent, RTP both ways, failing and hostile modes;
  ``python -m voicelab.doubles.sip``).

They speak the real wire protocols so the production clients are exercised end to end; they
are never used inside the code under test to fabricate a result. Doubles may import the core
(the real adapters they are reached through); the core reaches doubles only through the name
registries (``adapter: fake``), never by importing them.
"""
