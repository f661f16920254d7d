"""The Azure Blob service double refuses what Azure refuses: a request without a SharedKey
signature, one signed with another key, one whose signed parts were changed on the way; and it
agrees with azure-storage-blob's own signer (the client of adlfs) on every operation it uses."""

from __future__ import annotations

import base64
import email.utils

import httpx
import pytest

from voicelab.doubles.azure_blob import DEV_ACCOUNT, DEV_ACCOUNT_KEY, AzureBlobServer
from voicelab.doubles.azure_blob._signing import sign, string_to_sign

blob_sdk = pytest.importorskip("azure.storage.blob", reason="needs azure-storage-blob (pip "
                                                            "install 'voicelab[azure-storage]')")
OTHER_KEY = base64.b64encode(b"not the account key, 32 bytes!!!").decode()


@pytest.fixture(scope="module")
def server():
    with AzureBlobServer(containers=("box",)) as running:
        yield running


def _signed(server: AzureBlobServer, method: str, path: str, query: str = "", *,
            key: str = DEV_ACCOUNT_KEY, body: bytes = b"") -> dict[str, str]:
    headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-08-06",
               "content-length": str(len(body))}
    if method == "PUT":
        headers["x-ms-blob-type"] = "BlockBlob"
    text = string_to_sign(method, f"/{DEV_ACCOUNT}{path}", query, headers, account=DEV_ACCOUNT)
    return {**headers, "Authorization": f"SharedKey {DEV_ACCOUNT}:{sign(text, account_key=key)}"}


def test_the_sdk_signer_and_the_double_agree_on_every_operation(server):
    service = blob_sdk.BlobServiceClient.from_connection_string(server.connection_string)
    container = service.get_container_client("sdk")
    container.create_container()
    assert container.get_container_properties().name == "sdk"
    blob = container.get_blob_client("folder/name with space+plus.json")
    blob.upload_blob(b'{"a": 1}', metadata={"is_directory": "false"})
    # a staged upload: Put Block twice, then Put Block List
    blob_sdk.BlobClient.from_connection_string(
        server.connection_string, "sdk", "big.bin", max_single_put_size=4,
        max_block_size=4).upload_blob(b"0123456789")
    assert server.blob("sdk", "big.bin") == b"0123456789"
    assert blob.download_blob().readall() == b'{"a": 1}'
    assert blob.download_blob(offset=1, length=3).readall() == b'"a"'
    assert blob.get_blob_properties().metadata == {"is_directory": "false"}
    listed = list(container.walk_blobs(name_starts_with="", delimiter="/"))
    assert sorted(item.name for item in listed) == ["big.bin", "folder/"]
    assert [b.name for b in container.list_blobs(results_per_page=1)] == [
        "big.bin", "folder/name with space+plus.json"]  # paged by NextMarker
    blob.delete_blob()
    assert server.blob_names("sdk") == ["big.bin"]
    operations = {r.operation for r in server.requests}
    assert {"create_container", "get_container_properties", "put_blob", "put_block",
            "put_block_list", "get_blob", "get_blob_properties", "list_blobs",
            "delete_blob"} <= operations
    assert server.rejected_signatures == 0
    assert all(r.status < 400 for r in server.requests), server.requests


def test_a_client_with_another_key_is_refused_and_writes_nothing(server):
    wrong = server.connection_string.replace(DEV_ACCOUNT_KEY, OTHER_KEY)
    before = server.rejected_signatures
    blob = blob_sdk.BlobClient.from_connection_string(wrong, "box", "refused.txt")
    with pytest.raises(Exception) as refused:  # noqa: PT011 - the SDK's own error type
        blob.upload_blob(b"x")
    assert getattr(refused.value, "status_code", None) == 403
    assert getattr(refused.value, "error_code", None) == "AuthenticationFailed"
    assert server.rejected_signatures > before and server.blob("box", "refused.txt") is None


def test_a_changed_signed_part_or_no_signature_is_refused(server):
    url = f"{server.endpoint}/box/kept.txt"
    with httpx.Client() as client:
        good = client.put(url, content=b"kept", headers=_signed(server, "PUT", "/box/kept.txt",
                                                                   body=b"kept"))
        assert good.status_code == 201, good.text
        # the same signature on another blob, or with another date, or another key
        moved = client.put(f"{server.endpoint}/box/other.txt", content=b"kept",
                           headers=_signed(server, "PUT", "/box/kept.txt", body=b"kept"))
        redated = _signed(server, "GET", "/box/kept.txt")
        redated["x-ms-date"] = email.utils.formatdate(usegmt=True, timeval=1)
        stale = client.get(url, headers=redated)
        keyed = client.get(url, headers=_signed(server, "GET", "/box/kept.txt", key=OTHER_KEY))
        listed = client.get(f"{server.endpoint}/box", params={"restype": "container",
                                                               "comp": "list", "prefix": "k"},
                            headers=_signed(server, "GET", "/box",
                                            "restype=container&comp=list&prefix=x"))
        anonymous = client.get(url, headers={"x-ms-version": "2021-08-06"})
    for refused in (moved, stale, keyed, listed):
        assert refused.status_code == 403, refused.text
        assert refused.headers["x-ms-error-code"] == "AuthenticationFailed"
    assert anonymous.status_code == 401
    assert anonymous.headers["x-ms-error-code"] == "NoAuthenticationInformation"
    assert server.blob_names("box") == ["kept.txt"] and server.blob("box", "kept.txt") == b"kept"
