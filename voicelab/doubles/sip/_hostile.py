"""The failing and hostile far ends a client must survive, acting on an answered call.

Each is a setting (see :class:`SipDoubleSettings`) and reports what it did as truth:
``hang_up_after_seconds`` (a BYE), ``reinvite_after_seconds`` (a re-INVITE putting the caller
on hold: ``a=sendonly``), ``rtp_flood`` (``rtp_flood_packets_per_second`` packets of silence
on top of the media), ``dtmf_storm`` (``storm_count`` RFC 4733 events, each with its three
end packets), ``bye_storm`` (``storm_count`` BYEs in the dialog, then the call is over).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ._codec import Codec
from ._codec import silence as silence_of
from ._media import FRAME_BYTES, FRAME_SECONDS
from ._rtp import build_key_event
from ._settings import KEYS

if TYPE_CHECKING:
    from ._call import SipCall

#: packets sent between yields to the event loop, so a storm never starves other calls
BURST = 100


def start_hostile(call: SipCall) -> None:
    settings = call.settings
    if settings.bye_storm:  # the storm is the hang-up (after ``hang_up_after_seconds``)
        call.spawn(_bye_storm(call))
    elif settings.hang_up_after_seconds is not None:
        call.spawn(_hang_up_later(call, settings.hang_up_after_seconds))
    if settings.reinvite_after_seconds is not None and settings.reinvite_codec is not None:
        call.spawn(_change_codec_later(call, settings.reinvite_after_seconds,
                                       settings.reinvite_codec))
    elif settings.reinvite_after_seconds is not None:
        call.spawn(_hold_later(call, settings.reinvite_after_seconds))
    if settings.rtp_flood:
        call.spawn(_flood(call))
    if settings.dtmf_storm:
        call.spawn(_dtmf_storm(call))


async def _hang_up_later(call: SipCall, seconds: float) -> None:
    await asyncio.sleep(seconds)
    call.hang_up("hang_up_after_seconds")


async def _hold_later(call: SipCall, seconds: float) -> None:
    await asyncio.sleep(seconds)
    if call.state in ("answered", "confirmed"):
        call.requests.send("INVITE", body=call.sdp("sendonly"))
        call.note("reinvite_sent", direction="sendonly")


async def _change_codec_later(call: SipCall, seconds: float, codec: Codec) -> None:
    """A re-INVITE offering ``codec`` alone (of those the caller offered): the double speaks
    it from now on, as an offerer may (RFC 3264 8.3.2), and the caller's answer follows."""
    await asyncio.sleep(seconds)
    offer = call.offer
    if call.state not in ("answered", "confirmed") or offer is None:
        return
    payload_type = offer.payload_type_of(codec)
    if payload_type is None:
        call.note("codec_change_skipped", reason=f"the caller did not offer {codec}")
        return
    call.talk.use_codec(payload_type, codec, offer)
    call.requests.send("INVITE", body=call.sdp("sendrecv"))
    call.note("reinvite_sent", direction="sendrecv", codec=codec)


async def _flood(call: SipCall) -> None:
    per_tick = max(1, round(call.settings.rtp_flood_packets_per_second * FRAME_SECONDS))
    silence = silence_of(call.media.codec)
    call.note("rtp_flood_started", packets_per_second=call.settings.rtp_flood_packets_per_second)
    sent = 0
    try:
        while True:
            for index in range(per_tick):
                call.media.send_packet(call.media.payload_type, silence)
                sent += 1
                if index % BURST == BURST - 1:
                    await asyncio.sleep(0)
            await asyncio.sleep(FRAME_SECONDS)
    finally:
        call.note("rtp_flood_stopped", packets=sent)


async def _dtmf_storm(call: SipCall) -> None:
    event_type = call.offer.telephone_event if call.offer is not None else None
    if event_type is None:
        call.note("dtmf_storm_skipped", reason="no telephone-event in the offer")
        return
    media = call.media
    for number in range(call.settings.storm_count):
        key = KEYS[number % 12]
        media.timestamp = (media.timestamp + FRAME_BYTES) & 0xFFFFFFFF
        media.send_packet(event_type, build_key_event(key, end=False, duration=FRAME_BYTES),
                          marker=True)
        for _ in range(3):
            media.send_packet(event_type, build_key_event(key, end=True, duration=FRAME_BYTES))
        if number % BURST == BURST - 1:
            await asyncio.sleep(0.005)
    call.note("dtmf_storm_sent", events=call.settings.storm_count)


async def _bye_storm(call: SipCall) -> None:
    await asyncio.sleep(call.settings.hang_up_after_seconds or 0.5)
    if call.state not in ("answered", "confirmed"):
        return
    call.requests.send("BYE")
    call.note("bye_sent", why="bye_storm")
    for number in range(1, call.settings.storm_count):
        call.requests.send("BYE", retransmit=False)
        if number % BURST == 0:
            await asyncio.sleep(0.005)
    call.note("bye_storm_sent", requests=call.settings.storm_count)
    call.end("bye_storm")
