"""docs/operations.md's nginx block, as written, in front of a real `tenet serve`: a 150 MB upload streamed
through it (with a declared length and chunked) and a ranged download back through it.

nginx is Debian's (`make test` installs it, as it does Chromium); the block is read from the document, so the
snippet a team copies is the one that was tested. Only the address lines change: a free port for nginx and the
live server's port for the upstream.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port

pytestmark = pytest.mark.live_server

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BOUNDARY = "tenet-proxy-boundary-5d2e"
SIZE = 150 * 1024 * 1024
# The file: a PDF header, then a block of seeded bytes repeated, so any range of it is known without a copy.
HEADER = b"%PDF-1.7\n"
BLOCK = hashlib.shake_256(b"tenet proxy test").digest(64 * 1024)


def _file_bytes(start: int, stop: int) -> bytes:
    """Bytes [start, stop) of the test file."""
    out = bytearray()
    position = start
    while position < stop:
        if position < len(HEADER):
            piece = HEADER[position:min(stop, len(HEADER))]
        else:
            offset = (position - len(HEADER)) % len(BLOCK)
            piece = BLOCK[offset:offset + (stop - position)]
        out += piece
        position += len(piece)
    return bytes(out)


def _multipart(filename: str) -> tuple[bytes, bytes, int]:
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/pdf\r\n\r\n").encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    return head, tail, len(head) + SIZE + len(tail)


def _body(filename: str) -> Iterator[bytes]:
    head, tail, _ = _multipart(filename)
    yield head
    chunk = 1024 * 1024
    for start in range(0, SIZE, chunk):
        yield _file_bytes(start, min(SIZE, start + chunk))
    yield tail


def _nginx_block(upstream_port: int, listen_port: int) -> str:
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, "docs/operations.md holds one nginx block"
    block = blocks[0]
    for old, new in (("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream_port};"),
                     ("listen 80;", f"listen 127.0.0.1:{listen_port};"),
                     ("server_name tenet.example.com;", "server_name _;")):
        assert old in block, old
        block = block.replace(old, new)
    return block


@pytest.fixture
def nginx(live_server, tmp_path) -> Iterator[str]:
    if not Path(NGINX).exists():
        pytest.fail("nginx is missing: `make test` installs it (apt-get install nginx-light)")
    port = free_port()
    prefix = tmp_path / "nginx"
    (prefix / "logs").mkdir(parents=True)
    upstream_port = int(live_server.url.rsplit(":", 1)[1])
    config = prefix / "nginx.conf"
    config.write_text(f"""
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    {_nginx_block(upstream_port, port)}
}}
""", encoding="utf-8")
    process = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while True:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            pytest.fail(f"nginx did not start: {output}")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture
def agenda_item(live_server, live_admin_token) -> str:
    start = datetime.now(UTC) + timedelta(hours=1)
    with httpx.Client(base_url=f"{live_server.url}/api/v1/meeting-attendance",
                      headers={"Authorization": f"Bearer {live_admin_token}"}) as client:
        meeting = client.post("/meetings", json={"title": "Behind nginx", "start_time": start.isoformat(),
                                                 "end_time": (start + timedelta(hours=1)).isoformat()}).json()
        section = client.post(f"/meetings/{meeting['id']}/agenda/sections", json={"title": "Files"}).json()
        return client.post(f"/agenda/sections/{section['id']}/items", json={"title": "Recording"}).json()["id"]


@pytest.mark.parametrize("chunked", [False, True], ids=["declared-length", "chunked"])
def test_a_150_mb_upload_and_a_ranged_download_through_the_documented_nginx(nginx, agenda_item, live_admin_token,
                                                                             chunked):
    api = f"{nginx}/api/v1/meeting-attendance"
    headers = {"Authorization": f"Bearer {live_admin_token}",
               "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    _, _, length = _multipart("recording.pdf")
    if not chunked:
        headers["Content-Length"] = str(length)
    expected = hashlib.sha256()
    for start in range(0, SIZE, 8 * 1024 * 1024):
        expected.update(_file_bytes(start, min(SIZE, start + 8 * 1024 * 1024)))

    with httpx.Client(timeout=httpx.Timeout(300)) as client:
        uploaded = client.post(f"{api}/agenda-items/{agenda_item}/attachments", headers=headers,
                               content=_body("recording.pdf"))
        assert uploaded.status_code == 201, uploaded.text
        attachment = uploaded.json()
        assert attachment["size"] == str(SIZE) and attachment["sha256"] == expected.hexdigest()

        auth = {"Authorization": f"Bearer {live_admin_token}"}
        first, last = 100_000_003, 100_000_003 + 4095
        ranged = client.get(f"{api}/attachments/agenda-item/{attachment['id']}/download",
                            headers={**auth, "Range": f"bytes={first}-{last}"})
        assert ranged.status_code == 206, ranged.text
        assert ranged.headers["content-range"] == f"bytes {first}-{last}/{SIZE}"
        assert ranged.content == _file_bytes(first, last + 1)
        # The end of the file by a suffix range, as a player seeking to the end asks for it.
        tail = client.get(f"{api}/attachments/agenda-item/{attachment['id']}/download",
                          headers={**auth, "Range": "bytes=-1000"})
        assert tail.status_code == 206 and tail.content == _file_bytes(SIZE - 1000, SIZE)


def test_an_idle_connection_outlives_the_proxy_idle_timeout(live_server):
    """`tenet serve` keeps an idle keep-alive connection open longer than proxies keep theirs (KEEP_ALIVE_SECONDS,
    75 s), so the proxy, not Tenet, closes it: a request a proxy sends on a connection Tenet is closing is answered
    502 by the proxy (uvicorn's default is 5 s; the soak met that race). Here a request on a connection idle for
    6 s is still answered on the same socket."""
    host, port = live_server.url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/healthz")
        first = connection.getresponse()
        assert (first.status, first.read()) == (200, b'{"status":"ok"}')
        socket_used = connection.sock
        time.sleep(6)
        connection.request("GET", "/healthz")  # on the same socket: http.client reconnects only when it has none
        assert connection.sock is socket_used
        again = connection.getresponse()  # RemoteDisconnected had the server closed the idle connection
        assert (again.status, again.read()) == (200, b'{"status":"ok"}')
    finally:
        connection.close()
