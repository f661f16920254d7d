"""The channel model's codecs: what a packet's audio goes through between sender and receiver.

Each codec has three streaming steps, all on float64 sample arrays:

* ``to_line``: canonical 24 kHz audio -> the codec's rate (with any band limiting of the line);
* ``round_trip``: packets ``(n, samples_per_packet)`` of int16 -> what the receiver decodes
  (rows of lost packets are not decoded and come back as zeros);
* ``from_line``: the codec's rate -> 24 kHz.

The rate conversions are fixed-latency FIR filters (see ``_polyphase``), so one packet in is one
packet out and ``latency_samples`` (at 24 kHz) is constant.
"""

from __future__ import annotations

import numpy as np

from ..config import LineConfig, OpusConfig
from ..errors import MissingDependencyError
from ._format import CANONICAL_SAMPLE_RATE_HZ, PCM16_MAX, PCM16_MIN
from ._g711 import G711_SAMPLE_RATE_HZ, g711_round_trip
from ._polyphase import FixedLatencyResampler, kaiser_lowpass

#: a telephone line's voice band (ITU-T G.712): 300-3400 Hz
PHONE_BAND_LOW_HZ = 300.0
PHONE_BAND_HIGH_HZ = 3400.0
_PHONE_HIGHPASS_ORDER = 4  # Butterworth: -3 dB at 300 Hz, under 0.01 dB of loss from 700 Hz up

OPUS_FRAME_MS = (60, 40, 20, 10)  # the Opus frame sizes a packet of 10..60 ms is cut into
OPUS_PACKAGE = "opuslib-next-bundled"


def to_int16(samples: np.ndarray) -> np.ndarray:
    rounded = np.rint(samples)
    np.clip(rounded, float(PCM16_MIN), float(PCM16_MAX), out=rounded)  # in place: no new pages
    return rounded.astype(np.int16)


class PcmCodec:
    """No codec: 24 kHz linear PCM, bit-exact."""

    name = "pcm"
    sample_rate_hz = CANONICAL_SAMPLE_RATE_HZ
    latency_samples = 0

    def to_line(self, samples: np.ndarray) -> np.ndarray:
        return samples

    def round_trip(self, packets: np.ndarray, lost: np.ndarray) -> np.ndarray:
        return packets

    def from_line(self, samples: np.ndarray) -> np.ndarray:
        return samples


class G711Codec:
    """A phone line: 8 kHz, band-limited to 300-3400 Hz, mu-law or A-law.

    The upper band edge is the decimation filter (flat to 3400 Hz, at least 70 dB down from
    4000 Hz, so nothing aliases); the lower edge is a Butterworth high-pass at 300 Hz.
    """

    sample_rate_hz = G711_SAMPLE_RATE_HZ

    def __init__(self, law: str):
        from scipy.signal import butter  # scipy is a core dependency; loaded on first use

        self.name = law
        factor = CANONICAL_SAMPLE_RATE_HZ // G711_SAMPLE_RATE_HZ
        taps = kaiser_lowpass(passband_hz=PHONE_BAND_HIGH_HZ, stopband_hz=G711_SAMPLE_RATE_HZ / 2,
                              sample_rate_hz=CANONICAL_SAMPLE_RATE_HZ, delay_multiple=factor)
        self._down = FixedLatencyResampler(down=factor, taps=taps)
        self._up = FixedLatencyResampler(up=factor, taps=taps)
        # transfer-function form: at 4th order it matches second-order sections to 1e-12, and
        # lfilter's per-call overhead is lower than sosfilt's on a 20 ms packet (the live line
        # calls it per packet)
        self._highpass = butter(_PHONE_HIGHPASS_ORDER, PHONE_BAND_LOW_HZ, btype="highpass",
                                fs=G711_SAMPLE_RATE_HZ)
        self._highpass_state = np.zeros(_PHONE_HIGHPASS_ORDER)
        self.latency_samples = self._down.latency_samples * factor + self._up.latency_samples

    def to_line(self, samples: np.ndarray) -> np.ndarray:
        from scipy.signal import lfilter

        narrow = self._down.process(samples)
        numerator, denominator = self._highpass
        filtered, self._highpass_state = lfilter(numerator, denominator, narrow,
                                                 zi=self._highpass_state)
        return filtered

    def round_trip(self, packets: np.ndarray, lost: np.ndarray) -> np.ndarray:
        return g711_round_trip(packets, law=self.name)

    def from_line(self, samples: np.ndarray) -> np.ndarray:
        return self._up.process(samples)


class OpusCodec:
    """libopus (the ``voip`` application) at 24 kHz, or at 48 kHz behind a 2x FIR resampler.

    Every packet is encoded (the sender does not know what the network will lose); a lost packet
    is not decoded, but the decoder is told of it (libopus's own concealment runs and its output
    is discarded) so its state follows the stream as a real receiver's would. The channel's
    concealment policy decides what is played instead.
    """

    name = "opus"

    def __init__(self, config: OpusConfig, *, packet_ms: int):
        try:
            import opuslib_next
            import opuslib_next.api.decoder
        except (ImportError, OSError, RuntimeError) as error:  # absent, or its libopus won't load
            raise MissingDependencyError(OPUS_PACKAGE, extra="telephony",
                                         purpose="The opus channel codec") from error
        self.sample_rate_hz = config.sample_rate_hz
        frame_ms = next(size for size in OPUS_FRAME_MS if packet_ms % size == 0)
        self._frame_samples = self.sample_rate_hz * frame_ms // 1000
        self._encoder = opuslib_next.Encoder(self.sample_rate_hz, 1, "voip")
        self._encoder.bitrate = config.bitrate_bps
        self._decoder = opuslib_next.Decoder(self.sample_rate_hz, 1)
        self._decode = opuslib_next.api.decoder.decode
        self._up: FixedLatencyResampler | None = None
        self._down: FixedLatencyResampler | None = None
        # the encoder's look-ahead delays what the decoder returns (6.5 ms for ``voip``)
        self.latency_samples = (self._encoder.lookahead * CANONICAL_SAMPLE_RATE_HZ
                                // self.sample_rate_hz)
        if self.sample_rate_hz != CANONICAL_SAMPLE_RATE_HZ:
            factor = self.sample_rate_hz // CANONICAL_SAMPLE_RATE_HZ
            nyquist = CANONICAL_SAMPLE_RATE_HZ / 2
            # flat to 10.2 kHz, 60 dB down at 12 kHz: above what Opus codes at voice bitrates,
            # below its own noise, and half the taps of the phone line's 70 dB / 600 Hz design
            taps = kaiser_lowpass(passband_hz=0.85 * nyquist, stopband_hz=nyquist,
                                  sample_rate_hz=self.sample_rate_hz, attenuation_db=60.0,
                                  delay_multiple=factor)
            self._up = FixedLatencyResampler(up=factor, taps=taps)
            self._down = FixedLatencyResampler(down=factor, taps=taps)
            self.latency_samples += (self._up.latency_samples // factor
                                     + self._down.latency_samples)

    def to_line(self, samples: np.ndarray) -> np.ndarray:
        return samples if self._up is None else self._up.process(samples)

    def round_trip(self, packets: np.ndarray, lost: np.ndarray) -> np.ndarray:
        frame = self._frame_samples
        frames = packets.reshape(packets.shape[0], packets.shape[1] // frame, frame)
        decoded = np.zeros_like(frames)
        state = self._decoder.decoder_state
        for index, (packet, is_lost) in enumerate(zip(frames, lost.tolist(), strict=True)):
            for part, pcm in enumerate(packet):
                payload = self._encoder.encode(pcm.tobytes(), frame)
                if is_lost:
                    self._decode(state, None, 0, frame, False, channels=1)
                else:
                    decoded[index, part] = np.frombuffer(
                        self._decode(state, payload, len(payload), frame, False, channels=1),
                        dtype=np.int16)
        return decoded.reshape(packets.shape)

    def from_line(self, samples: np.ndarray) -> np.ndarray:
        return samples if self._down is None else self._down.process(samples)


def build_codec(config: LineConfig) -> PcmCodec | G711Codec | OpusCodec:
    if config.codec == "pcm":
        return PcmCodec()
    if config.codec in ("mulaw", "alaw"):
        return G711Codec(config.codec)
    return OpusCodec(config.opus or OpusConfig(), packet_ms=config.packet_ms)
