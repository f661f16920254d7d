"""HTTP digest authentication as SIP uses it (RFC 3261 section 22, RFC 7616, RFC 8760).

A 401 (``WWW-Authenticate``) or 407 (``Proxy-Authenticate``) carries one challenge per
algorithm the server accepts; :func:`best_challenge` takes the strongest we compute (SHA-512-256,
SHA-256, MD5, each also in its ``-sess`` form), and :func:`authorization` answers it, with
``qop=auth`` when offered. The password appears only inside the hash.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MAX_CHALLENGE_CHARS = 4096
_MAX_PARAMS = 32
_HASHES: dict[str, str] = {"MD5": "md5", "SHA-256": "sha256", "SHA-512-256": "sha512_256"}
_STRENGTH = ["MD5", "SHA-256", "SHA-512-256"]


class DigestError(ValueError):
    """A challenge we cannot answer."""


@dataclass(frozen=True)
class Challenge:
    realm: str
    nonce: str
    algorithm: str = "MD5"  # upper case, possibly with "-SESS"
    qop: tuple[str, ...] = ()
    opaque: str | None = None

    @property
    def base_algorithm(self) -> str:
        return self.algorithm.removesuffix("-SESS")


def parse_challenge(value: str) -> Challenge:
    """Parse one ``Digest ...`` challenge; raises :class:`DigestError`."""
    if len(value) > MAX_CHALLENGE_CHARS:
        raise DigestError("challenge too long")
    scheme, _, rest = value.strip().partition(" ")
    if scheme.lower() != "digest":
        raise DigestError(f"not a digest challenge: {scheme[:20]!r}")
    params = _params(rest)
    if "realm" not in params or "nonce" not in params:
        raise DigestError("challenge without realm or nonce")
    algorithm = params.get("algorithm", "MD5").upper()
    if algorithm.removesuffix("-SESS") not in _HASHES:
        raise DigestError(f"unsupported algorithm {algorithm[:20]!r}")
    qop = tuple(q.strip().lower() for q in params.get("qop", "").split(",") if q.strip())
    return Challenge(realm=params["realm"], nonce=params["nonce"], algorithm=algorithm,
                     qop=qop, opaque=params.get("opaque"))


def _params(text: str) -> dict[str, str]:
    """``name=value, name="quoted, value"`` pairs, quoted strings unescaped."""
    params: dict[str, str] = {}
    index, length = 0, len(text)
    while index < length and len(params) < _MAX_PARAMS:
        while index < length and text[index] in " \t,":
            index += 1
        equals = text.find("=", index)
        if equals < 0:
            break
        name = text[index:equals].strip().lower()
        index = equals + 1
        while index < length and text[index] in " \t":
            index += 1
        if index < length and text[index] == '"':
            value, index = _quoted(text, index + 1)
        else:
            end = text.find(",", index)
            end = length if end < 0 else end
            value, index = text[index:end].strip(), end
        params[name] = value
    return params


def _quoted(text: str, index: int) -> tuple[str, int]:
    chars: list[str] = []
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            chars.append(text[index + 1])
            index += 2
            continue
        if char == '"':
            return "".join(chars), index + 1
        chars.append(char)
        index += 1
    raise DigestError("unterminated quoted string")


def best_challenge(values: list[str]) -> Challenge:
    """The strongest challenge we can answer among a response's challenge headers."""
    usable: list[Challenge] = []
    for value in values[:16]:
        try:
            usable.append(parse_challenge(value))
        except DigestError:
            continue
    if not usable:
        raise DigestError("no digest challenge we can answer")
    return max(usable, key=lambda c: _STRENGTH.index(c.base_algorithm))


def _hash(algorithm: str, text: str) -> str:
    return hashlib.new(_HASHES[algorithm], text.encode("utf-8")).hexdigest()


def digest_response(challenge: Challenge, *, username: str, password: str, method: str,
                    uri: str, cnonce: str, nc: int = 1) -> str:
    """The ``response`` value (RFC 7616 section 3.4.1)."""
    algorithm = challenge.base_algorithm
    ha1 = _hash(algorithm, f"{username}:{challenge.realm}:{password}")
    if challenge.algorithm.endswith("-SESS"):
        ha1 = _hash(algorithm, f"{ha1}:{challenge.nonce}:{cnonce}")
    ha2 = _hash(algorithm, f"{method}:{uri}")
    if "auth" in challenge.qop:
        return _hash(algorithm, f"{ha1}:{challenge.nonce}:{nc:08x}:{cnonce}:auth:{ha2}")
    return _hash(algorithm, f"{ha1}:{challenge.nonce}:{ha2}")


def authorization(challenge: Challenge, *, username: str, password: str, method: str,
                  uri: str, new_cnonce: Callable[[], str] = lambda: secrets.token_hex(8),
                  ) -> str:
    """The ``Authorization`` / ``Proxy-Authorization`` value answering ``challenge``."""
    cnonce = new_cnonce()
    response = digest_response(challenge, username=username, password=password, method=method,
                               uri=uri, cnonce=cnonce)
    parts = [f'username="{_escape(username)}"', f'realm="{_escape(challenge.realm)}"',
             f'nonce="{_escape(challenge.nonce)}"', f'uri="{_escape(uri)}"',
             f'response="{response}"', f"algorithm={challenge.algorithm}"]
    if "auth" in challenge.qop:
        parts += [f'cnonce="{cnonce}"', "qop=auth", "nc=00000001"]
    if challenge.opaque is not None:
        parts.append(f'opaque="{_escape(challenge.opaque)}"')
    return "Digest " + ", ".join(parts)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
