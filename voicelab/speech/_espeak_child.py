"""One eSpeak NG request in a fresh process (run as a script: standard library only).

libespeak-ng keeps synthesis state across calls in one process (the same text comes out a few
samples different each time, and neither re-initializing nor seeding resets it), so each
utterance is synthesized by a new process that loads the library, answers one request and
exits: the same request then gives the same samples in every process. A crash inside the C
library ends this process, not the evaluator.

Request (JSON on stdin): ``{"library", "data", "command": "voices"}`` or ``{..., "command":
"synthesize", "voice", "text", "rate_wpm", "pitch", "seed"}``. Reply on stdout: the voices as
JSON, or the sample rate (4 bytes, little-endian) and the samples (pcm_s16le, mono). A failure
is one line on stderr and exit status 1.
"""

import ctypes
import json
import sys
from typing import Any

_SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS: samples come to the callback, no audio device
_POSITION_CHARACTER = 1
_CHARS_UTF8 = 1
_PARAMETER_RATE = 1
_PARAMETER_PITCH = 3
_MAX_REQUEST_BYTES = 1 << 20


class _Voice(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("languages", ctypes.c_void_p),
                ("identifier", ctypes.c_char_p), ("gender", ctypes.c_ubyte),
                ("age", ctypes.c_ubyte), ("variant", ctypes.c_ubyte), ("xx1", ctypes.c_ubyte),
                ("score", ctypes.c_int), ("spare", ctypes.c_void_p)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.c_void_p)


def _languages(pointer: int) -> list[str]:
    """A voice's languages: (priority byte, NUL-terminated name) pairs, ended by a 0 byte."""
    names = []
    offset = 0
    while ctypes.string_at(pointer + offset, 1) != b"\0":
        name = ctypes.string_at(pointer + offset + 1)
        names.append(name.decode("utf-8", "replace"))
        offset += 2 + len(name)
    return names


def _voices(lib: ctypes.CDLL) -> list[dict[str, object]]:
    lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))
    listed = lib.espeak_ListVoices(None)
    voices = []
    index = 0
    while listed[index]:
        voice = listed[index].contents
        voices.append({"name": (voice.name or b"").decode("utf-8", "replace"),
                       "identifier": (voice.identifier or b"").decode("utf-8", "replace"),
                       "languages": _languages(voice.languages) if voice.languages else []})
        index += 1
    return voices


def _synthesize(lib: ctypes.CDLL, request: dict[str, Any]) -> bytes:
    samples = bytearray()

    def collect(wav: Any, count: int, events: object) -> int:
        if wav and count > 0:
            samples.extend(ctypes.string_at(wav, count * 2))
        return 0

    callback = _CALLBACK(collect)
    lib.espeak_SetSynthCallback(callback)
    if lib.espeak_SetVoiceByName(str(request["voice"]).encode()) != 0:
        raise RuntimeError(f"eSpeak NG has no voice {request['voice']!r}")
    lib.espeak_SetParameter(_PARAMETER_RATE, int(request["rate_wpm"]), 0)
    lib.espeak_SetParameter(_PARAMETER_PITCH, int(request["pitch"]), 0)
    lib.espeak_ng_SetRandSeed(int(request["seed"]) & 0x7FFFFFFF)
    text = str(request["text"]).encode("utf-8") + b"\0"
    status = lib.espeak_Synth(text, ctypes.c_size_t(len(text)), 0, _POSITION_CHARACTER, 0,
                              _CHARS_UTF8, None, None)
    if status != 0 or lib.espeak_Synchronize() != 0:
        raise RuntimeError(f"eSpeak NG failed to synthesize (status {status})")
    return bytes(samples)


def main() -> int:
    try:
        request = json.loads(sys.stdin.buffer.read(_MAX_REQUEST_BYTES))
        lib = ctypes.CDLL(str(request["library"]))
        sample_rate_hz = lib.espeak_Initialize(_SYNCHRONOUS, 0, str(request["data"]).encode(), 0)
        if sample_rate_hz <= 0:
            raise RuntimeError(f"eSpeak NG did not initialize (data {request['data']})")
        if request["command"] == "voices":
            sys.stdout.buffer.write(json.dumps(_voices(lib)).encode())
        else:
            pcm = _synthesize(lib, request)
            sys.stdout.buffer.write(int(sample_rate_hz).to_bytes(4, "little") + pcm)
        sys.stdout.buffer.flush()
    except Exception as error:  # noqa: BLE001 - the parent reports it as a speech failure
        sys.stderr.write(f"{type(error).__name__}: {error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
