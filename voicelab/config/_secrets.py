"""Secret sanitizing: nothing written, logged or hashed may contain a configured secret.

A secret is masked as written and in the encodings a product is likely to echo it in:
percent-encoding (``quote``, ``quote_plus``, either hex case), JSON string escaping, and base64
(standard and URL-safe, with and without padding), including base64 of the secret inside a
longer encoded value (``Basic`` credentials, a token wrapped in a JSON blob): in each of the
three byte alignments, the base64 characters that depend on the secret's bytes alone are
masked, so at most the 2 + 4 bits of the characters straddling its edges remain.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable, Container, Iterable, Mapping
from functools import lru_cache
from typing import Any, overload
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

from pydantic import JsonValue

MASK = "***"

_SECRET_NAME_TOKENS = frozenset({
    "token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
    "key", "apikey", "authorization", "cookie", "signature", "sas", "pat",
})
_SECRET_NAME_PHRASES = ("connection_string", "connectionstring", "conn_str", "private_key",
                        "client_secret", "access_key", "api_key")
_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SECRET_ENV_VAR = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)KEY($|_)|APIKEY|CONNECTION_STRING|"
    r"CONN_STR|(^|_)PAT($|_)|(^|_)SAS($|_)|AUTHORIZATION|COOKIE)")

#: Secret values shorter than this are not scrubbed as substrings (they would mangle ordinary
#: text); the fields that hold them are still masked by name.
MIN_SCRUB_LENGTH = 4


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True for a field name like ``access_token``, ``apiKey``, ``Authorization`` or ``password``."""
    spaced = _CAMEL.sub("_", name).lower()
    if any(phrase in spaced for phrase in _SECRET_NAME_PHRASES):
        return True
    return any(token in _SECRET_NAME_TOKENS for token in _SPLIT.split(spaced) if token)


def is_secret_env_var(name: str) -> bool:
    return bool(_SECRET_ENV_VAR.search(name.upper()))


def _percent_forms(secret: str) -> set[str]:
    forms = {quote(secret, safe=safe) for safe in ("", "/")}
    forms |= {quote_plus(secret, safe=safe) for safe in ("", "/")}
    return forms | {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), f) for f in forms}


def _base64_forms(secret: str) -> set[str]:
    raw = secret.encode("utf-8")
    standard: set[str] = set()
    whole = base64.b64encode(raw).decode("ascii")
    standard |= {whole, whole.rstrip("=")}
    for shift in range(3):  # the secret starting 0, 1 or 2 bytes into a 3-byte group
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        first = -(-8 * shift // 6)               # first character past the preceding bytes
        last = 8 * (shift + len(raw)) // 6       # first character reaching past the secret
        standard.add(encoded[first:last])
    url_safe = {form.translate(_URL_SAFE) for form in standard}
    return {form for form in standard | url_safe if form}


_URL_SAFE = str.maketrans("+/", "-_")


def encoded_forms(secret: str) -> set[str]:
    """``secret`` and the encodings of it the scrubber masks (see the module docstring)."""
    json_forms = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    return {secret} | _percent_forms(secret) | json_forms | _base64_forms(secret)


class SecretScrubber:
    """Masks secret-named fields and every known secret value, recursively, keys included.

    One instance per run holds the secret values the configuration interpolated or named, so
    raw endpoint events, logs and error messages can be scrubbed with the same rule. Each value
    is also masked in the encodings :func:`encoded_forms` lists.
    """

    def __init__(self, secret_values: Iterable[str] = ()):
        values = {v for v in secret_values if isinstance(v, str) and len(v) >= MIN_SCRUB_LENGTH}
        self.secret_values = frozenset(values)
        forms = {form for value in values for form in encoded_forms(value)}
        # longest first: a whole encoding wins over the shorter core found inside it
        ordered = sorted(forms, key=lambda form: (-len(form), form))
        self._pattern = re.compile("|".join(re.escape(f) for f in ordered)) if ordered else None

    def with_values(self, values: Iterable[str]) -> SecretScrubber:
        return SecretScrubber([*self.secret_values, *values])

    def scrub_text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def scrub(self, value: object) -> Any:
        """A copy of ``value`` with secret-named fields masked and secret values replaced.

        Mapping keys are scrubbed like values (a product may echo a secret as a key); two keys
        that scrub to the same text are both kept, the later one numbered.
        """
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            cleaned: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str) and is_secret_name(key) and item not in (None, "", {}, []):
                    item = MASK if not isinstance(item, Mapping) else self.scrub(item)
                else:
                    item = self.scrub(item)
                if isinstance(key, str):
                    key = distinct_key(self.scrub_text(key), cleaned)
                cleaned[key] = item
            return cleaned
        if isinstance(value, list | tuple):
            return [self.scrub(item) for item in value]
        return value



def distinct_key(key: str, taken: Container[object]) -> str:
    """``key``, numbered when a mapping being rewritten already holds it (two keys that mask or
    redact to the same text are both kept, the later one numbered)."""
    if key not in taken:
        return key
    number = 2
    while f"{key} ({number})" in taken:
        number += 1
    return f"{key} ({number})"


def collect_named_secrets(value: object) -> set[str]:
    """Every string held under a secret-named field (so it can be scrubbed as a substring too)."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key):
                found.update(_strings(item))
            else:
                found.update(collect_named_secrets(item))
    elif isinstance(value, list | tuple):
        for item in value:
            found.update(collect_named_secrets(item))
    return found


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, Mapping):
        return {s for item in value.values() for s in _strings(item)}
    if isinstance(value, list | tuple):
        return {s for item in value for s in _strings(item)}
    return set()


# --- transport secrets: handshake headers and URL credentials ------------------------------

#: Query parameters that name a choice, not a credential: kept readable in resolved-settings.json
#: (and in the suite hash). Every other query value of a URL in the run file is a secret.
PUBLIC_QUERY_PARAMETERS = frozenset({"api-version", "api_version", "model", "deployment",
                                     "language", "voice"})
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _parameters(text: str) -> list[tuple[str, str, bool]]:
    """(name, value, secret) for each ``name=value`` (or bare ``value``) of a query string."""
    found = []
    for item in text.split("&"):
        name, equals, value = item.partition("=")
        if not equals:
            name, value = "", name
        public = unquote_plus(name).lower() in PUBLIC_QUERY_PARAMETERS
        found.append((name, value, bool(value) and not public))
    return found


def _masked_parameters(text: str) -> str:
    items = []
    for name, value, secret in _parameters(text):
        shown = MASK if secret else value
        items.append(f"{name}={shown}" if name else shown)
    return "&".join(items)


def url_secret_values(url: str) -> set[str]:
    """The credentials a URL carries: its user info and every query value not known public.

    Each value is returned as written and percent-decoded, since a product may echo either.
    """
    if not _URL.match(url):
        return set()
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # e.g. an unclosed IPv6 bracket: the adapter refuses it anyway
        return set()
    found: set[str] = set()
    user_info, at, _ = parts.netloc.rpartition("@")
    if at and user_info:
        found |= {user_info, unquote(user_info)}
        if password:
            found |= {password, unquote(password)}
    for text in (parts.query, parts.fragment if "=" in parts.fragment else ""):
        for _, value, secret in _parameters(text) if text else []:
            if secret:
                found |= {value, unquote_plus(value)}
    return found


def mask_url(url: str) -> str:
    """``url`` with its user info and every non-public query value replaced by ``***``."""
    if not _URL.match(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    user_info, at, host = parts.netloc.rpartition("@")
    netloc = f"{MASK}@{host}" if at and user_info else parts.netloc
    query = _masked_parameters(parts.query) if parts.query else ""
    fragment = _masked_parameters(parts.fragment) if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _is_headers(key: object, value: object) -> bool:
    return isinstance(key, str) and key.lower() == "headers" and isinstance(value, Mapping)


def transport_secret_values(document: object) -> set[str]:
    """Every handshake header value and URL credential in a run document (see :func:`mask_transport`)."""
    found: set[str] = set()
    if isinstance(document, Mapping):
        for key, value in document.items():
            if _is_headers(key, value):
                found.update(v for v in _strings(value) if v)
            else:
                found.update(transport_secret_values(value))
    elif isinstance(document, list | tuple):
        for item in document:
            found.update(transport_secret_values(item))
    elif isinstance(document, str):
        found.update(url_secret_values(document))
    return found


@overload
def mask_transport(document: JsonValue) -> JsonValue: ...


@overload
def mask_transport(document: object) -> object: ...


def mask_transport(document: object) -> object:
    """A copy of a run document with every value under a ``headers`` mapping masked and every
    URL's user info and non-public query values masked (``endpoint.settings.headers``,
    ``endpoint.settings.uri``, the same keys in any adapter's or provider's settings)."""
    if isinstance(document, Mapping):
        return {key: ({name: MASK if item not in (None, "") else item
                       for name, item in value.items()}
                      if _is_headers(key, value) else mask_transport(value))
                for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [mask_transport(item) for item in document]
    if isinstance(document, str):
        return mask_url(document)
    return document


# --- launch command lines -----------------------------------------------------------------------

#: ``--name value`` or ``--name=value`` (one or two dashes) on a command line
_FLAG = re.compile(r"^--?([A-Za-z][A-Za-z0-9_.-]*)(?:=(.*))?$", re.DOTALL)


def command_secret_values(command: Iterable[object]) -> set[str]:
    """The arguments of a command line that follow a flag whose name looks secret
    (``--api-key VALUE``, ``--token=VALUE``, ``-password VALUE``)."""
    found: set[str] = set()
    arguments = [str(item) for item in command]
    for index, argument in enumerate(arguments[1:], start=1):
        match = _FLAG.match(argument)
        if match is None or not is_secret_name(match.group(1)):
            continue
        if match.group(2) is not None:
            found.add(match.group(2))
        elif index + 1 < len(arguments) and not arguments[index + 1].startswith("-"):
            found.add(arguments[index + 1])
    return {value for value in found if value}


def launch_secret_values(run_document: object) -> set[str]:
    """The secrets of a run document's ``endpoint.launch``: arguments after secret-looking
    flags, and the ``env`` values named in ``secret_env`` (names that look secret are found
    by :func:`collect_named_secrets` already)."""
    endpoint = run_document.get("endpoint") if isinstance(run_document, Mapping) else None
    launch = endpoint.get("launch") if isinstance(endpoint, Mapping) else None
    if not isinstance(launch, Mapping):
        return set()
    found: set[str] = set()
    command = launch.get("command")
    if isinstance(command, list):
        found |= command_secret_values(command)
    env = launch.get("env")
    declared = launch.get("secret_env")
    if isinstance(env, Mapping) and isinstance(declared, list):
        found |= {str(env[name]) for name in declared
                  if isinstance(name, str) and env.get(name) not in (None, "")}
    return found


# --- secrets the process has met outside any run (store URLs on the command line) --------------

_remembered: set[str] = set()
_remembered_lock = threading.Lock()


def remember_secrets(values: Iterable[str]) -> None:
    """Secrets met outside a run's configuration (a store URL's credentials given on the
    command line): every later :func:`known_secrets_scrubber` masks them too."""
    fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SCRUB_LENGTH}
    if fresh:
        with _remembered_lock:
            _remembered.update(fresh)


def known_secrets_scrubber() -> SecretScrubber:
    """A scrubber of every secret :func:`remember_secrets` was given in this process."""
    with _remembered_lock:
        values = frozenset(_remembered)
    return _scrubber_of(values)


@lru_cache(maxsize=16)
def _scrubber_of(values: frozenset[str]) -> SecretScrubber:
    return SecretScrubber(values)


# --- what this process's runs redact, for the lines it shows outside a bundle --------------------

_text_filters: list[Callable[[str], str]] = []


def remember_text_filter(text_filter: Callable[[str], str]) -> None:
    """A run's filter of words (``retention.transcripts: redacted``): every later
    :func:`mask_known` applies it too, so the command line's own lines (its log on stderr, its
    error lines) redact what that run's bundle redacts."""
    with _remembered_lock:
        if text_filter not in _text_filters:
            _text_filters.append(text_filter)


def mask_known(text: str) -> str:
    """``text`` with every secret this process met and every remembered run filter applied."""
    text = known_secrets_scrubber().scrub_text(text)
    with _remembered_lock:
        filters = list(_text_filters)
    for text_filter in filters:
        text = text_filter(text)
    return text
