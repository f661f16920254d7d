"""Digest authentication as a SIP server checks it (RFC 3261 22, RFC 2617, RFC 7616 / 8760).

The double challenges an INVITE with 401 and ``WWW-Authenticate: Digest`` (a fresh nonce,
``qop="auth"``, MD5 or SHA-256) and verifies the retried request's ``Authorization``: the
response hash recomputed from the configured password, the nonce one it issued, the realm its
own. The header is hostile input: its size and parameter count are bounded.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Literal

Algorithm = Literal["MD5", "SHA-256"]
MAX_AUTHORIZATION_BYTES = 4096
MAX_PARAMETERS = 20
_PARAMETER = re.compile(r'\s*([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]*)\s*(?:,|$)')


def new_nonce() -> str:
    return secrets.token_hex(16)


def challenge(*, realm: str, nonce: str, algorithm: Algorithm) -> str:
    return f'Digest realm="{realm}", nonce="{nonce}", algorithm={algorithm}, qop="auth"'


def parameters(header: str) -> dict[str, str] | None:
    """The parameters of a ``Digest`` credentials header, None when it is not one (or is over
    the limits)."""
    if len(header) > MAX_AUTHORIZATION_BYTES:
        return None
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "digest":
        return None
    found: dict[str, str] = {}
    position = count = 0
    rest = rest.strip()
    while position < len(rest):
        match = _PARAMETER.match(rest, position)
        count += 1
        if match is None or match.end() == position or count > MAX_PARAMETERS:
            return None
        value = match.group(2)
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        found[match.group(1).lower()] = value
        position = match.end()
    return found


def _hash(algorithm: Algorithm, text: str) -> str:
    name = "sha256" if algorithm == "SHA-256" else "md5"
    return hashlib.new(name, text.encode("utf-8")).hexdigest()


def expected_response(given: dict[str, str], *, method: str, password: str,
                      algorithm: Algorithm) -> str:
    """The response the client should have computed (RFC 2617 3.2.2.1, RFC 7616 3.4.1)."""
    ha1 = _hash(algorithm, f"{given.get('username', '')}:{given.get('realm', '')}:{password}")
    ha2 = _hash(algorithm, f"{method}:{given.get('uri', '')}")
    nonce = given.get("nonce", "")
    if given.get("qop"):
        return _hash(algorithm, f"{ha1}:{nonce}:{given.get('nc', '')}:{given.get('cnonce', '')}"
                                f":{given['qop']}:{ha2}")
    return _hash(algorithm, f"{ha1}:{nonce}:{ha2}")


def verify(header: str, *, method: str, username: str, password: str, realm: str,
           nonces: set[str], algorithm: Algorithm) -> str | None:
    """None when ``header`` proves the password; else why not (a short reason)."""
    given = parameters(header)
    if given is None:
        return "Authorization is not Digest credentials"
    if given.get("algorithm", "MD5").upper() != algorithm:
        return f"algorithm {given.get('algorithm', 'MD5')[:20]!r}, challenged {algorithm}"
    if given.get("username") != username or given.get("realm") != realm:
        return "unknown username or realm"
    if given.get("nonce") not in nonces:
        return "a nonce the double never issued"
    if given.get("qop") not in (None, "auth") or \
            (given.get("qop") and not (given.get("nc") and given.get("cnonce"))):
        return "qop=auth without nc and cnonce"
    expected = expected_response(given, method=method, password=password, algorithm=algorithm)
    if not hmac.compare_digest(expected, given.get("response", "").lower()):
        return "wrong response hash"
    return None
