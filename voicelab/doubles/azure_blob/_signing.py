"""Azure Storage SharedKey authorization (Blob service, version 2009-09-19 and later), as
Microsoft's "Authorize with Shared Key" documents it: the string to sign is the verb, twelve
standard headers, the canonicalized ``x-ms-`` headers and the canonicalized resource; the
signature is its HMAC-SHA256 under the base64-decoded account key, base64-encoded."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import parse_qsl

#: The Azure Storage emulator's documented development account (Azurite uses the same).
DEV_ACCOUNT = "devstoreaccount1"
DEV_ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
                   "KBHBeksoGMGw==")

#: The standard headers of the string to sign, in their order.
_SIGNED_HEADERS = ("content-encoding", "content-language", "content-length", "content-md5",
                   "content-type", "date", "if-modified-since", "if-match", "if-none-match",
                   "if-unmodified-since", "range")


def string_to_sign(method: str, raw_path: str, raw_query: str, headers: Mapping[str, str], *,
                   account: str) -> str:
    """What the client signed. ``headers`` are keyed in lower case; ``raw_path`` is the path
    as sent (percent-encoded), ``raw_query`` the query string."""
    standard = []
    for name in _SIGNED_HEADERS:
        value = headers.get(name, "")
        if name == "content-length" and value == "0":
            value = ""  # version 2015-02-21 and later: a zero length is signed as empty
        standard.append(value)
    canonical_headers = "".join(
        f"{name}:{' '.join(headers[name].split())}\n"
        for name in sorted(h for h in headers if h.startswith("x-ms-")))
    resource = f"/{account}{raw_path}"
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query.setdefault(name.lower(), []).append(value)
    for name in sorted(query):
        resource += f"\n{name}:{','.join(sorted(query[name]))}"
    return "\n".join([method.upper(), *standard]) + "\n" + canonical_headers + resource


def sign(text: str, *, account_key: str) -> str:
    digest = hmac.new(base64.b64decode(account_key), text.encode("utf-8"), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode("ascii")


def signature_is_valid(authorization: str, expected_text: str, *, account: str,
                       account_key: str) -> bool:
    """``Authorization: SharedKey <account>:<signature>`` signs ``expected_text``."""
    scheme, _, credential = authorization.partition(" ")
    name, _, signature = credential.partition(":")
    if scheme != "SharedKey" or name != account or not signature:
        return False
    expected = sign(expected_text, account_key=account_key)
    return hmac.compare_digest(signature.encode(), expected.encode())
