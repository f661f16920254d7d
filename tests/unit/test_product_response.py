"""What a persona is shown of a product response: the audio is joined only when read."""

from __future__ import annotations

import dataclasses

import numpy as np

from voicelab.audio import PcmAudio
from voicelab.personas import ProductResponse


def test_audio_given_as_a_function_is_rendered_once_when_first_read():
    calls = []

    def render() -> PcmAudio:
        calls.append(1)
        return PcmAudio(np.arange(4, dtype=np.int16))

    response = ProductResponse(index=0, audio=render)
    assert calls == []
    assert response.audio is not None and response.audio.samples.tolist() == [0, 1, 2, 3]
    assert response.audio is response.audio and calls == [1]
    assert dataclasses.replace(response, index=1).audio is response.audio


def test_audio_given_as_a_value_or_not_at_all_reads_as_before():
    audio = PcmAudio(np.zeros(2, dtype=np.int16))
    assert ProductResponse(index=0, audio=audio).audio is audio
    assert ProductResponse(index=0).audio is None
    response = ProductResponse(index=0)
    response.audio = audio
    assert response.audio is audio
