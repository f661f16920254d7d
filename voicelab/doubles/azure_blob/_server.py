"""A local Azure Blob Storage service on 127.0.0.1 for tests: the REST operations adlfs and
azure-storage-blob use for voicelab's artifact store, on path-style URLs
(``http://127.0.0.1:PORT/devstoreaccount1/<container>/<blob>``, as the Azure emulators serve).

Container: Create, Get Properties, Delete, List Blobs (prefix, delimiter, marker, maxresults;
XML). Blob: Put Blob, Put Block, Put Block List, Get Blob (whole or a range), Get Blob
Properties (HEAD), Delete Blob. Every request must carry a valid SharedKey signature of the
account key and an ``x-ms-date`` within 15 minutes; otherwise 403 ``AuthenticationFailed``, as
Azure answers. Everything else is 501 ``UnsupportedOperation`` (recorded, so a test sees it).
Writes can be denied (``deny_writes_containing``: a permission a role or SAS lacks). Every
request is recorded (its operation name and status), without its Authorization header::

    with AzureBlobServer() as server:
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import socket
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from .._http_server import DoubleHTTPServer, ThreadedHttpDouble
from ._model import Blob, Container, enumeration_results, http_date, operation_name
from ._signing import DEV_ACCOUNT, DEV_ACCOUNT_KEY, signature_is_valid, string_to_sign

#: How far ``x-ms-date`` may be from the server's clock (Azure's limit).
_CLOCK_SKEW_SECONDS = 15 * 60
_DEFAULT_MAX_RESULTS = 5000


@dataclass
class RecordedBlobRequest:
    method: str
    path: str
    operation: str
    status: int = 0


class _Failure(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return None

    # --- plumbing -------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(self, status: int, body: bytes = b"", *, headers: dict[str, str] | None = None,
               content_type: str | None = None) -> None:
        self._record.status = status
        self.send_response(status)
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        self.send_header("x-ms-version", self.headers.get("x-ms-version") or "2021-08-06")
        self.send_header("Date", http_date(time.time()))
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _fail(self, failure: _Failure) -> None:
        body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{failure.code}</Code>'
                f"<Message>{failure.message}</Message></Error>").encode()
        self._reply(failure.status, body, headers={"x-ms-error-code": failure.code},
                    content_type="application/xml")

    def _authenticate(self, raw_path: str, raw_query: str) -> None:
        owner = self.server.owner
        authorization = self.headers.get("Authorization")
        if not authorization:
            raise _Failure(401, "NoAuthenticationInformation",
                           "Server failed to authenticate the request. Please refer to the "
                           "information in the www-authenticate header.")
        sent = self.headers.get("x-ms-date") or self.headers.get("Date") or ""
        stamp = email.utils.parsedate_to_datetime(sent).timestamp() if sent else None
        if stamp is None or abs(time.time() - stamp) > _CLOCK_SKEW_SECONDS:
            raise _Failure(403, "AuthenticationFailed", "Request date header too old or absent.")
        headers = {name.lower(): value for name, value in self.headers.items()}
        text = string_to_sign(self.command, raw_path, raw_query, headers,
                              account=owner.account)
        if not signature_is_valid(authorization, text, account=owner.account,
                                  account_key=owner.account_key):
            with owner._lock:
                owner.rejected_signatures += 1
            raise _Failure(403, "AuthenticationFailed",
                           "Server failed to authenticate the request. Make sure the value of "
                           "Authorization header is formed correctly including the signature.")

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        query = {name: values[-1] for name, values in
                 parse_qs(parts.query, keep_blank_values=True).items()}
        account, _, rest = parts.path.lstrip("/").partition("/")
        container, _, blob = rest.partition("/")
        blob = unquote(blob)
        operation = operation_name(self.command, blob, query, container=container)
        self._record = RecordedBlobRequest(self.command, parts.path, operation)
        with self.server.owner._lock:
            self.server.owner.requests.append(self._record)
        body = self._body() if self.command in ("PUT", "POST") else b""
        try:
            if account != self.server.owner.account:
                raise _Failure(400, "InvalidUri", f"no such account {account!r}")
            self._authenticate(parts.path, parts.query)
            handler = getattr(self, f"_op_{operation}", None)
            if handler is None:
                raise _Failure(501, "UnsupportedOperation",
                               f"{operation} is not implemented by this double")
            handler(unquote(container), blob, query, body)
        except _Failure as failure:
            self._fail(failure)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _dispatch

    # --- operations -----------------------------------------------------------------------

    def _container(self, name: str) -> Container:
        found = self.server.owner._containers.get(name)
        if found is None:
            raise _Failure(404, "ContainerNotFound", "The specified container does not exist.")
        return found

    def _blob(self, container: str, name: str) -> Blob:
        found = self._container(container).blobs.get(name)
        if found is None:
            raise _Failure(404, "BlobNotFound", "The specified blob does not exist.")
        return found

    def _metadata(self) -> dict[str, str]:
        return {name[len("x-ms-meta-"):]: value for name, value in self.headers.items()
                if name.lower().startswith("x-ms-meta-")}

    def _op_create_container(self, container: str, blob: str, query: dict[str, str],
                             body: bytes) -> None:
        with self.server.owner._lock:
            if container in self.server.owner._containers:
                raise _Failure(409, "ContainerAlreadyExists",
                               "The specified container already exists.")
            created = self.server.owner._containers[container] = Container()
        self._reply(201, headers={"ETag": created.etag,
                                  "Last-Modified": http_date(created.modified)})

    def _op_get_container_properties(self, container: str, blob: str, query: dict[str, str],
                                     body: bytes) -> None:
        found = self._container(container)
        self._reply(200, headers={"ETag": found.etag, "Last-Modified": http_date(found.modified),
                                  "x-ms-lease-status": "unlocked",
                                  "x-ms-lease-state": "available"})

    def _op_delete_container(self, container: str, blob: str, query: dict[str, str],
                             body: bytes) -> None:
        with self.server.owner._lock:
            self._container(container)
            del self.server.owner._containers[container]
        self._reply(202)

    def _op_list_blobs(self, container: str, blob: str, query: dict[str, str],
                       body: bytes) -> None:
        found = self._container(container)
        prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
        marker = query.get("marker", "")
        limit = int(query.get("maxresults") or _DEFAULT_MAX_RESULTS)
        with self.server.owner._lock:
            blobs = dict(found.blobs)
        root = enumeration_results(blobs, container=container, prefix=prefix,
                                   delimiter=delimiter, marker=marker, limit=limit,
                                   include=query.get("include", "").split(","),
                                   service_endpoint=f"{self.server.owner.endpoint}/")
        document = b'<?xml version="1.0" encoding="utf-8"?>' + ElementTree.tostring(root)
        self._reply(200, document, content_type="application/xml")

    def _check_write_permission(self, name: str) -> None:
        denied = self.server.owner.deny_writes_containing
        if denied is not None and denied in name:
            raise _Failure(403, "AuthorizationPermissionMismatch", "This request is not "
                           "authorized to perform this operation using this permission.")

    def _store(self, container: str, name: str, data: bytes) -> Blob:
        stored = Blob(data, self.headers.get("x-ms-blob-content-type")
                       or self.headers.get("Content-Type") or "application/octet-stream",
                       self._metadata())
        with self.server.owner._lock:
            found = self._container(container)
            if self.headers.get("If-None-Match") == "*" and name in found.blobs:
                raise _Failure(409, "BlobAlreadyExists", "The specified blob already exists.")
            existing = found.blobs.get(name)
            if existing is not None:
                stored.created = existing.created
            found.blobs[name] = stored
            found.blocks.pop(name, None)
        return stored

    def _written(self, stored: Blob, status: int = 201) -> None:
        self._reply(status, headers={"ETag": stored.etag,
                                     "Last-Modified": http_date(stored.modified),
                                     "Content-MD5": stored.content_md5,
                                     "x-ms-request-server-encrypted": "false"})

    def _op_put_blob(self, container: str, blob: str, query: dict[str, str],
                     body: bytes) -> None:
        self._check_write_permission(blob)
        if self.headers.get("x-ms-blob-type") != "BlockBlob":
            raise _Failure(501, "UnsupportedOperation", "only block blobs are implemented")
        sent_md5 = self.headers.get("Content-MD5")
        if sent_md5 and sent_md5 != base64.b64encode(hashlib.md5(body).digest()).decode():  # noqa: S324
            raise _Failure(400, "Md5Mismatch", "The MD5 value specified in the request did "
                           "not match with the MD5 value calculated by the server.")
        self._written(self._store(container, blob, body))

    def _op_put_block(self, container: str, blob: str, query: dict[str, str],
                      body: bytes) -> None:
        self._check_write_permission(blob)
        with self.server.owner._lock:
            self._container(container).blocks.setdefault(blob, {})[query["blockid"]] = body
        self._reply(201, headers={"x-ms-request-server-encrypted": "false"})

    def _op_put_block_list(self, container: str, blob: str, query: dict[str, str],
                           body: bytes) -> None:
        self._check_write_permission(blob)  # committing is a write too
        with self.server.owner._lock:
            staged = dict(self._container(container).blocks.get(blob, {}))
        try:
            ids = [element.text or "" for element in ElementTree.fromstring(body)]
        except ElementTree.ParseError:
            raise _Failure(400, "InvalidXmlDocument", "XML specified is not syntactically "
                           "valid.") from None
        missing = [block for block in ids if block not in staged]
        if missing:
            raise _Failure(400, "InvalidBlockList", "The specified block list is invalid.")
        self._written(self._store(container, blob, b"".join(staged[block] for block in ids)))

    def _properties(self, stored: Blob) -> dict[str, str]:
        return {"ETag": stored.etag, "Last-Modified": http_date(stored.modified),
                "x-ms-creation-time": http_date(stored.created), "x-ms-blob-type": "BlockBlob",
                "Content-MD5": stored.content_md5, "Accept-Ranges": "bytes",
                "x-ms-lease-status": "unlocked", "x-ms-lease-state": "available",
                "x-ms-server-encrypted": "false",
                **{f"x-ms-meta-{key}": value for key, value in stored.metadata.items()}}

    def _op_get_blob_properties(self, container: str, blob: str, query: dict[str, str],
                                body: bytes) -> None:
        stored = self._blob(container, blob)
        self._reply(200, headers={**self._properties(stored),
                                  "Content-Length": str(len(stored.data))},
                    content_type=stored.content_type)

    def _op_get_blob(self, container: str, blob: str, query: dict[str, str],
                     body: bytes) -> None:
        stored = self._blob(container, blob)
        size = len(stored.data)
        requested = self.headers.get("x-ms-range") or self.headers.get("Range")
        if not requested:
            self._reply(200, stored.data, headers=self._properties(stored),
                        content_type=stored.content_type)
            return
        first_text, _, last_text = requested.removeprefix("bytes=").partition("-")
        first = int(first_text)
        last = min(int(last_text), size - 1) if last_text else size - 1
        if first >= size:
            raise _Failure(416, "InvalidRange", "The range specified is invalid for the "
                           "current size of the resource.")
        headers = {**self._properties(stored), "Content-Range": f"bytes {first}-{last}/{size}"}
        headers.pop("Content-MD5")  # the MD5 is of the whole blob
        self._reply(206, stored.data[first:last + 1], headers=headers,
                    content_type=stored.content_type)

    def _op_delete_blob(self, container: str, blob: str, query: dict[str, str],
                        body: bytes) -> None:
        with self.server.owner._lock:
            self._blob(container, blob)
            del self._container(container).blobs[blob]
        self._reply(202, headers={"x-ms-delete-type-permanent": "true"})


class _Server(DoubleHTTPServer):
    owner: AzureBlobServer

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket],
                     client_address: object) -> None:
        # a client that gives up on a connection (an upload batch cancelled after one failed)
        # is not the server's error
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class AzureBlobServer(ThreadedHttpDouble):
    """The local Blob service of one account (by default the emulators' development account
    and key). ``containers`` are created at start."""

    handler = _Handler
    server_class = _Server
    thread_name = "azure-blob-server"

    def __init__(self, *, account: str = DEV_ACCOUNT, account_key: str = DEV_ACCOUNT_KEY,
                 containers: tuple[str, ...] = ()) -> None:
        self.account = account
        self.account_key = account_key
        self.requests: list[RecordedBlobRequest] = []
        #: requests answered 403 because their signature did not match
        self.rejected_signatures = 0
        #: writes (Put Blob, Put Block, Put Block List) to a blob whose name contains this are
        #: answered 403 ``AuthorizationPermissionMismatch``, as Azure answers a role or SAS
        #: without write permission
        self.deny_writes_containing: str | None = None
        self._containers: dict[str, Container] = {name: Container() for name in containers}
        self._lock = threading.Lock()

    def blob(self, container: str, name: str) -> bytes | None:
        """A blob's content as stored (None when there is none)."""
        with self._lock:
            found = self._containers.get(container)
            stored = None if found is None else found.blobs.get(name)
            return None if stored is None else stored.data

    def blob_names(self, container: str, prefix: str = "") -> list[str]:
        with self._lock:
            found = self._containers.get(container)
            return sorted(n for n in (found.blobs if found else {}) if n.startswith(prefix))

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The account's blob endpoint (path-style, as the emulators serve)."""
        return f"http://127.0.0.1:{self.port}/{self.account}"

    @property
    def connection_string(self) -> str:
        """The value for ``AZURE_STORAGE_CONNECTION_STRING``."""
        return (f"DefaultEndpointsProtocol=http;AccountName={self.account};"
                f"AccountKey={self.account_key};BlobEndpoint={self.endpoint};")


