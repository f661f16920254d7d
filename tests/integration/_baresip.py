"""Debian's baresip (1.0) as an auto-answering far end for the SIP interop tests.

One process for a test module, with a private config folder: G.711, an ``aufile`` prompt as its
microphone (a 440 Hz tone, then silence: in 1.0 a call ends when the file runs out), ``sndfile``
recording what it decodes (what voicelab sent) and ``ctrl_tcp`` for its events (netstring JSON:
``CALL_ESTABLISHED``, ``CALL_DTMF_START`` with the key in ``param``, ``CALL_CLOSED`` ...; each
names the call by our Call-ID in ``id``) and commands (``hangup`` comes from ``menu``).
Everything listens on 127.0.0.1 only (``net_interface 127.0.0.1``, else it puts the host's
first interface address in its SDP).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import wave
from pathlib import Path

import numpy as np

PROMPT_HZ = 440.0
PROMPT_TONE_SECONDS = 1.5
PROMPT_SILENCE_SECONDS = 30.0
SAMPLE_RATE_HZ = 8000


def prompt_samples() -> np.ndarray:
    """The prompt's tone (int16), before its silence."""
    t = np.arange(int(PROMPT_TONE_SECONDS * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    return (8000 * np.sin(2 * np.pi * PROMPT_HZ * t)).astype(np.int16)


def _write_prompt(path: Path) -> None:
    samples = np.concatenate([prompt_samples(), np.zeros(int(PROMPT_SILENCE_SECONDS
                                                             * SAMPLE_RATE_HZ), np.int16)])
    with wave.open(str(path), "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(SAMPLE_RATE_HZ)
        file.writeframes(samples.tobytes())


def _free_sip_port() -> int:
    """A port free for UDP and TCP, with the next one free for TCP (baresip's TLS listener)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, \
                    socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tls:
                udp.bind(("127.0.0.1", port))
                tls.bind(("127.0.0.1", port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for baresip")


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


CONFIG = """\
poll_method		epoll
net_interface		127.0.0.1
sip_listen		127.0.0.1:{sip_port}
call_local_timeout	120
call_max_calls		4
audio_player		aubridge,nil
audio_source		aufile,{prompt}
audio_alert		aubridge,nil
ausrc_srate		8000
auplay_srate		8000
ausrc_channels		1
auplay_channels		1
rtcp_mux		no
jitter_buffer_delay	1-10
module_path		/usr/lib/baresip/modules
module			g711.so
module			aufile.so
module			aubridge.so
module			sndfile.so
module_tmp		account.so
module_app		menu.so
module_app		ctrl_tcp.so
ctrl_tcp_listen		127.0.0.1:{ctrl_port}
snd_path		{recordings}
"""


class Baresip:
    """A running baresip, its ctrl_tcp events (a thread reads them) and its recordings."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.recordings = folder / "recordings"
        self.recordings.mkdir(parents=True)
        self.sip_port = _free_sip_port()
        self.ctrl_port = _free_tcp_port()
        _write_prompt(folder / "prompt.wav")
        (folder / "config").write_text(CONFIG.format(
            sip_port=self.sip_port, ctrl_port=self.ctrl_port, prompt=folder / "prompt.wav",
            recordings=self.recordings))
        (folder / "accounts").write_text(
            "<sip:agent@127.0.0.1>;answermode=auto;regint=0;audio_codecs=pcmu,pcma\n")
        (folder / "contacts").write_text("")
        self._log = (folder / "baresip.log").open("wb")
        self.process = subprocess.Popen(["baresip", "-4", "-f", str(folder)],
                                        stdin=subprocess.DEVNULL, stdout=self._log,
                                        stderr=subprocess.STDOUT)
        self.events: list[dict[str, object]] = []
        self._lock = threading.Lock()
        self._control = self._connect()
        threading.Thread(target=self._read, daemon=True, name="baresip-ctrl").start()

    @property
    def uri(self) -> str:
        return f"sip:agent@127.0.0.1:{self.sip_port}"

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"baresip exited: {self.log()[-2000:]}")
            try:
                return socket.create_connection(("127.0.0.1", self.ctrl_port), timeout=1)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _read(self) -> None:
        buffer = b""
        self._control.settimeout(None)
        while True:
            try:
                data = self._control.recv(65536)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while b":" in buffer:
                length_text, _, rest = buffer.partition(b":")
                length = int(length_text)
                if len(rest) < length + 1:
                    break
                with self._lock:
                    self.events.append(json.loads(rest[:length]))
                buffer = rest[length + 1:]  # past the trailing ","

    def events_of(self, call_id: str) -> list[dict[str, object]]:
        with self._lock:
            return [e for e in self.events if e.get("id") == call_id]

    def wait_for(self, call_id: str, kind: str, *, count: int = 1,
                 timeout: float = 10) -> list[dict[str, object]]:
        """The call's events of ``kind`` once there are ``count`` of them."""
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events_of(call_id) if e.get("type") == kind]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def command(self, command: str, params: str = "") -> None:
        body = json.dumps({"command": command, "params": params, "token": "t"}).encode()
        self._control.sendall(b"%d:%s," % (len(body), body))

    def decoded_recording(self, after: float) -> np.ndarray:
        """What baresip decoded (what voicelab sent) in its newest call since ``after``."""
        files = sorted((p for p in self.recordings.glob("dump-*-dec.wav")
                        if p.stat().st_mtime >= after), key=lambda p: p.stat().st_mtime)
        if not files:
            return np.zeros(0, np.int16)
        with wave.open(str(files[-1]), "rb") as file:
            return np.frombuffer(file.readframes(file.getnframes()), np.int16)

    def log(self) -> str:
        return (self.folder / "baresip.log").read_text(errors="replace")

    def stop(self) -> None:
        self._control.close()
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
