"""The Azure Blob double's storage (containers of block blobs, in memory) and the documents
and names of its REST API: the List Blobs XML reply, the operation a request names."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import time
import uuid
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field


@dataclass
class Blob:
    data: bytes
    content_type: str
    metadata: dict[str, str]
    etag: str = field(default_factory=lambda: f'"0x{uuid.uuid4().hex[:15].upper()}"')
    modified: float = field(default_factory=time.time)
    created: float = field(default_factory=time.time)

    @property
    def content_md5(self) -> str:
        return base64.b64encode(hashlib.md5(self.data).digest()).decode()  # noqa: S324


@dataclass
class Container:
    blobs: dict[str, Blob] = field(default_factory=dict)
    #: uncommitted blocks by blob name and block id (Put Block before Put Block List)
    blocks: dict[str, dict[str, bytes]] = field(default_factory=dict)
    etag: str = field(default_factory=lambda: f'"0x{uuid.uuid4().hex[:15].upper()}"')
    modified: float = field(default_factory=time.time)


def http_date(seconds: float) -> str:
    return email.utils.formatdate(seconds, usegmt=True)


def enumeration_results(blobs: dict[str, Blob], *, container: str, prefix: str, delimiter: str,
                        marker: str, limit: int, include: list[str],
                        service_endpoint: str) -> ElementTree.Element:
    """List Blobs' ``EnumerationResults``: the blobs under ``prefix`` from ``marker`` on, those
    below a further ``delimiter`` rolled up into one ``BlobPrefix``, ``limit`` entries a page
    (``NextMarker`` names the next entry)."""
    entries: dict[str, Blob | None] = {}  # name -> blob, or None for a BlobPrefix
    for name, item in blobs.items():
        if not name.startswith(prefix):
            continue
        cut = name.find(delimiter, len(prefix)) if delimiter else -1
        if cut >= 0:
            entries.setdefault(name[:cut + len(delimiter)], None)
        else:
            entries[name] = item
    names = [name for name in sorted(entries) if name >= marker]
    page, rest = names[:limit], names[limit:]
    root = ElementTree.Element("EnumerationResults", {
        "ServiceEndpoint": service_endpoint, "ContainerName": container})
    for tag, value in (("Prefix", prefix), ("Marker", marker), ("MaxResults", str(limit)),
                       ("Delimiter", delimiter)):
        if value:
            ElementTree.SubElement(root, tag).text = value
    listed = ElementTree.SubElement(root, "Blobs")
    for name in page:
        entry = entries[name]
        if entry is None:
            ElementTree.SubElement(ElementTree.SubElement(listed, "BlobPrefix"),
                                   "Name").text = name
            continue
        item = entry
        element = ElementTree.SubElement(listed, "Blob")
        ElementTree.SubElement(element, "Name").text = name
        properties = ElementTree.SubElement(element, "Properties")
        for tag, value in (("Creation-Time", http_date(item.created)),
                           ("Last-Modified", http_date(item.modified)),
                           ("Etag", item.etag), ("Content-Length", str(len(item.data))),
                           ("Content-Type", item.content_type),
                           ("Content-MD5", item.content_md5), ("BlobType", "BlockBlob"),
                           ("LeaseStatus", "unlocked"), ("LeaseState", "available")):
            ElementTree.SubElement(properties, tag).text = value
        if "metadata" in include:
            metadata = ElementTree.SubElement(element, "Metadata")
            for key, value in item.metadata.items():
                ElementTree.SubElement(metadata, key).text = value
    ElementTree.SubElement(root, "NextMarker").text = rest[0] if rest else None
    return root


def operation_name(method: str, blob: str, query: dict[str, str], *, container: str) -> str:
    """The REST operation a request names (Azure's names, snake_case)."""
    restype, comp = query.get("restype"), query.get("comp")
    if not blob:
        if restype == "container" and comp is None:
            return {"PUT": "create_container", "GET": "get_container_properties",
                    "HEAD": "get_container_properties",
                    "DELETE": "delete_container"}.get(method, f"{method} container")
        if restype == "container" and comp == "list" and method == "GET":
            return "list_blobs"
        return f"{method} {container or 'account'} restype={restype} comp={comp}"
    if comp is None:
        return {"PUT": "put_blob", "GET": "get_blob", "HEAD": "get_blob_properties",
                "DELETE": "delete_blob"}.get(method, f"{method} blob")
    if method == "PUT" and comp == "block":
        return "put_block"
    if method == "PUT" and comp == "blocklist":
        return "put_block_list"
    return f"{method} blob comp={comp}"
