"""The shared WebSocket transport's ways to its server: wss:// (a trusted and an untrusted
certificate) and an HTTP CONNECT proxy named in the environment, over real sockets on 127.0.0.1.
Messages, stamps and closing: test_socket_receive.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from _websocket_peers import open_client, until_closure, websocket_server

from voicelab.endpoints import Closure, EndpointError, MessageInbox

# --- TLS -----------------------------------------------------------------------------------

def _self_signed_certificate(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key (PEM files), or skip the test."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        import shutil
        import subprocess

        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl CLI is available")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True,
                       capture_output=True)
        return str(cert), str(key)
    private_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(private_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private_key, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private_key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return str(cert), str(key)


def test_wss_connects_over_tls_and_refuses_an_untrusted_certificate(tmp_path):
    import ssl

    cert, key = _self_signed_certificate(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)

    async def echo(ws):
        async for message in ws:
            await ws.send(message)

    async def main():
        async with websocket_server(echo, ssl=server_tls) as uri:
            assert uri.startswith("wss://")
            with pytest.raises(EndpointError) as untrusted:
                await open_client(uri, MessageInbox())  # the system's trust store: not this cert
            inbox = MessageInbox()
            ws = await open_client(uri, inbox, ssl_context=ssl.create_default_context(cafile=cert))
            await ws.send("over tls")
            await ws.send(b"\x01" * 70_000)
            first, second = await inbox.get(), await inbox.get()
            await ws.close()
            return untrusted.value, [first[1], second[1]], (await until_closure(inbox))[-1]

    untrusted, echoed, (_, closure) = asyncio.run(main())
    assert untrusted.code == "connection_failed"
    assert echoed == ["over tls", b"\x01" * 70_000]
    assert closure == Closure(1000, "")


# --- proxies -------------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def _connect_proxy(requests: list[bytes], *, answer: bytes = b"200 Connection established"
                         ) -> AsyncIterator[str]:
    """An HTTP proxy that opens CONNECT tunnels (or answers ``answer`` without one)."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        requests.append(head)
        if not answer.startswith(b"200"):
            writer.write(b"HTTP/1.1 " + answer + b"\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 " + answer + b"\r\n\r\n")
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://user:s3cret@127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def _echo(ws):
    async for message in ws:
        await ws.send(message)


@pytest.mark.parametrize("secure", [False, True], ids=["ws", "wss"])
def test_a_proxy_named_in_the_environment_carries_the_connection(monkeypatch, tmp_path, secure):
    import ssl

    server_tls = client_tls = None
    if secure:
        cert, key = _self_signed_certificate(tmp_path)
        server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_tls.load_cert_chain(cert, key)
        client_tls = ssl.create_default_context(cafile=cert)
    requests: list[bytes] = []

    async def main():
        async with websocket_server(_echo, ssl=server_tls) as uri, \
                _connect_proxy(requests) as proxy:
            monkeypatch.setenv("wss_proxy" if secure else "ws_proxy", proxy)
            monkeypatch.delenv("no_proxy", raising=False)
            monkeypatch.delenv("NO_PROXY", raising=False)
            inbox = MessageInbox()
            ws = await open_client(uri, inbox, ssl_context=client_tls)
            await ws.send("through the proxy")
            echoed = await inbox.get()
            await ws.close()
            return uri, echoed[1], (await until_closure(inbox))[-1][1]

    uri, echoed, closure = asyncio.run(main())
    assert echoed == "through the proxy" and closure == Closure(1000, "")
    target = uri.split("://")[1]
    assert requests[0].startswith(f"CONNECT {target} HTTP/1.1\r\n".encode())
    assert b"Proxy-Authorization: Basic dXNlcjpzM2NyZXQ=\r\n" in requests[0]  # user:s3cret


def test_a_proxy_that_refuses_the_tunnel_fails_the_connection(monkeypatch):
    requests: list[bytes] = []

    async def main():
        async with websocket_server(_echo) as uri, \
                _connect_proxy(requests, answer=b"407 Proxy Authentication Required") as proxy:
            monkeypatch.setenv("ws_proxy", proxy)
            monkeypatch.delenv("no_proxy", raising=False)
            monkeypatch.delenv("NO_PROXY", raising=False)
            with pytest.raises(EndpointError) as refused:
                await open_client(uri, MessageInbox())
            return refused.value

    refused = asyncio.run(main())
    assert refused.code == "connection_failed"
    assert "HTTP 407" in str(refused) and "s3cret" not in str(refused)
