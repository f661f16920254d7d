"""SIP URIs (RFC 3261 section 19.1) and name-addr header values, parsed within bounds.

Only what a caller needs: the scheme, user, host, port and the ``transport`` parameter of the
URI it dials, and the URI and parameters (``tag``) of a To/From/Contact value. Anything else in
a URI is kept as text and passed on untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A URI longer than this is refused: no real SIP URI comes near it.
MAX_URI_CHARS = 1024
DEFAULT_PORTS = {"sip": 5060, "sips": 5061}

_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,253}))$")
_USER = re.compile(r"^[A-Za-z0-9\-_.!~*'()&=+$,;?/%]{1,256}$")
_TOKEN = re.compile(r"^[A-Za-z0-9\-.!%*_+`'~]{1,64}$")


class UriError(ValueError):
    """A URI that is not a usable ``sip:`` URI; the message says what is wrong."""


@dataclass(frozen=True)
class SipUri:
    """One ``sip:``/``sips:`` URI; ``port`` is None when the URI names none."""

    scheme: str
    host: str
    user: str | None = None
    port: int | None = None
    params: tuple[tuple[str, str | None], ...] = ()

    @property
    def transport(self) -> str | None:
        """The ``;transport=`` parameter, lower case, when there is one."""
        for name, value in self.params:
            if name == "transport" and value is not None:
                return value.lower()
        return None

    @property
    def effective_port(self) -> int:
        """The port to send to: the URI's own, else the scheme's default."""
        return self.port if self.port is not None else DEFAULT_PORTS[self.scheme]

    def __str__(self) -> str:
        text = f"{self.scheme}:"
        if self.user is not None:
            text += f"{self.user}@"
        text += self.host
        if self.port is not None:
            text += f":{self.port}"
        for name, value in self.params:
            text += f";{name}" if value is None else f";{name}={value}"
        return text


def parse_uri(text: str) -> SipUri:
    """Parse ``sip:[user@]host[:port][;params]``; raises :class:`UriError`."""
    if len(text) > MAX_URI_CHARS:
        raise UriError(f"URI longer than {MAX_URI_CHARS} characters")
    scheme, colon, rest = text.strip().partition(":")
    scheme = scheme.lower()
    if not colon or scheme not in DEFAULT_PORTS:
        raise UriError(f"not a sip: URI: {text[:80]!r}")
    rest = rest.split("?", 1)[0]  # URI headers are not used by a caller
    user: str | None = None
    if "@" in rest:
        user, _, rest = rest.rpartition("@")
        user = user.split(":", 1)[0]  # a password in a URI is never used (RFC 3261 19.1.1)
        if not _USER.match(user):
            raise UriError(f"bad user part in {text[:80]!r}")
    hostport, *param_texts = rest.split(";")
    host, port = _host_port(hostport, text)
    if len(param_texts) > 32:
        raise UriError("too many URI parameters")
    params = tuple(_param(p, text) for p in param_texts if p)
    return SipUri(scheme=scheme, host=host, user=user, port=port, params=params)


def _host_port(hostport: str, text: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        host, _, tail = hostport.partition("]")
        host += "]"
        port_text = tail[1:] if tail.startswith(":") else None
        if tail and port_text is None:
            raise UriError(f"bad host in {text[:80]!r}")
    else:
        host, colon, port_text_raw = hostport.partition(":")
        port_text = port_text_raw if colon else None
    if not _HOST.match(host):
        raise UriError(f"bad host in {text[:80]!r}")
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UriError(f"bad port in {text[:80]!r}")
    return host, int(port_text)


def _param(text: str, uri: str) -> tuple[str, str | None]:
    name, equals, value = text.partition("=")
    if not _TOKEN.match(name) or (equals and not _TOKEN.match(value)):
        raise UriError(f"bad URI parameter in {uri[:80]!r}")
    return name.lower(), value if equals else None


@dataclass(frozen=True)
class NameAddr:
    """A To/From/Contact value: the URI text and the header parameters after it."""

    uri: str
    params: dict[str, str | None] = field(default_factory=dict)

    @property
    def tag(self) -> str | None:
        """The dialog tag (RFC 3261 19.3), when the value carries one."""
        return self.params.get("tag")


def parse_name_addr(value: str) -> NameAddr:
    """Split ``"Name" <uri>;tag=x`` (or a bare ``uri;tag=x``) into the URI and parameters."""
    value = value.strip()[:MAX_URI_CHARS * 2]
    if "<" in value:
        start = value.index("<")
        end = value.find(">", start)
        if end < 0:
            raise UriError("unclosed '<' in an address")
        uri, tail = value[start + 1:end], value[end + 1:]
    else:
        uri, _, tail = value.partition(";")
        tail = ";" + tail if tail else ""
    params: dict[str, str | None] = {}
    for part in tail.split(";")[:32]:
        part = part.strip()
        if part:
            name, equals, param_value = part.partition("=")
            params[name.strip().lower()] = param_value.strip() if equals else None
    return NameAddr(uri=uri.strip(), params=params)
