"""Local protocol doubles on 127.0.0.1 (OpenAI-compatible, Azure TTS, Realtime) for tests and demos.

They speak the real wire protocols so the production clients are exercised end to end; they
are never used inside the code under test to fabricate a result.
"""
