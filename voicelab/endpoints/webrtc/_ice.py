"""Which host addresses ICE gathers candidates on, per peer connection.

aioice (aiortc's ICE) gathers host candidates on every interface except loopback, and neither
``RTCConfiguration`` nor ``RTCIceGatherer`` in aiortc 1.16 takes a list of addresses: there is
no public seam. A product on the same machine (a double, a bot in development) is reached over
127.0.0.1 only when a candidate is gathered there, so ``settings.ice_host_addresses`` needs one.

The least invasive hook: aioice looks the addresses up through its module-level function
``aioice.ice.get_host_addresses`` each time a connection gathers. :func:`gathering_on` wraps
that function once with one that reads a context variable: inside ``with gathering_on([...])``
(and in the tasks started there, which copy the context) gathering uses exactly those addresses;
everywhere else, and for every other user of aioice in the process, the original runs
unchanged. This module is the only place that touches aioice.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar

#: the addresses of the connection gathering in this context (None: aioice's own choice)
_CHOSEN: ContextVar[tuple[str, ...] | None] = ContextVar("voicelab_ice_host_addresses",
                                                         default=None)
_installed: list[Callable[[bool, bool], list[str]]] = []


def check_host_address(address: str) -> str:
    """``address`` as an IP literal (ICE host candidates are addresses, not names)."""
    return str(ipaddress.ip_address(address))


def _choose(original: Callable[[bool, bool], list[str]]) -> Callable[[bool, bool], list[str]]:
    def host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        chosen = _CHOSEN.get()
        if chosen is None:
            return original(use_ipv4, use_ipv6)
        return [address for address in chosen
                if (use_ipv6 if ipaddress.ip_address(address).version == 6 else use_ipv4)]
    return host_addresses


def _install() -> None:
    if _installed:
        return
    import aioice.ice

    original = aioice.ice.get_host_addresses
    _installed.append(original)
    aioice.ice.get_host_addresses = _choose(original)  # type: ignore[assignment]


@contextlib.contextmanager
def gathering_on(addresses: Sequence[str]) -> Iterator[None]:
    """ICE gathering started inside this block uses ``addresses`` (none given: aioice's own
    interfaces, loopback excluded)."""
    if not addresses:
        yield
        return
    _install()
    token = _CHOSEN.set(tuple(check_host_address(a) for a in addresses))
    try:
        yield
    finally:
        _CHOSEN.reset(token)
