"""Slow clients against a real `rearrange serve`: a body or headers sent a byte at a time.

Every route answers a trickling body 408 (the contract's error body) and closes the
connection; headers that do not complete, or a connection that sends nothing, are closed.
Each test trickles for a bounded number of bytes: a server that held the connection would
still be waiting when they run out, and the test fails on that, not on a clock. On the
native path (tests/paths.py) `port` is the data port, where `/v1/rerank` and `/healthz`
are served: the routes it does not serve are tried on the control port (`ports`).
"""
from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.api.test_live_server import PAGE, start_server
from tests.redis_server import answers, free_port

TIMEOUT = "0.5"  # REARRANGE_BODY_TIMEOUT_SECONDS and REARRANGE_HEADER_TIMEOUT_SECONDS
STEP = 0.1  # seconds between two trickled bytes
BUDGET = 100  # bytes trickled at most (~10 s): far past either timeout
AUTH = "Authorization: Bearer t\r\n"


@pytest.fixture(scope="module")
def ports(tmp_path_factory) -> Iterator[tuple[int, int]]:
    """(the control port, the data port) of one server."""
    data = free_port()
    proc, base, _ = start_server(tmp_path_factory.mktemp("slow"),
                                 REARRANGE_BODY_TIMEOUT_SECONDS=TIMEOUT,
                                 REARRANGE_HEADER_TIMEOUT_SECONDS=TIMEOUT,
                                 REARRANGE_DATA_PORT=str(data))
    assert answers(f"http://127.0.0.1:{data}/healthz", 20)
    yield int(base.rsplit(":", 1)[1]), data
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def port(ports: tuple[int, int], rerank_path: str) -> int:
    """The port under test: the control port, or the data port on the native path."""
    return ports[1] if rerank_path == "native" else ports[0]


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(STEP)
    return s


def trickle(s: socket.socket, data: bytes) -> bytes:
    """Send `data` a byte at a time until the server answers or closes; what it sent.

    Stops at the end of `data` too, so a server that holds the connection is not waited
    on forever (the caller's assertions then fail)."""
    received = b""
    for byte in data:
        try:
            s.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return received + read_rest(s)
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
        return received + read_rest(s)
    return received


def read_rest(s: socket.socket) -> bytes:
    """Everything until the server closes; raises TimeoutError if it keeps the connection."""
    s.settimeout(5)
    received = b""
    try:
        while chunk := s.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def response(s: socket.socket) -> bytes:
    """One whole response (headers, then the body its Content-Length declares)."""
    s.settimeout(5)
    received = b""
    while b"\r\n\r\n" not in received:
        received += s.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.lower().split(b"\r\n")
                      if line.startswith(b"content-length:")))
    while len(body) < length:
        body += s.recv(65536)
    return received


def closed_by_server(s: socket.socket) -> bool:
    """True once the server has closed `s` (EOF or reset); False if it still holds it."""
    s.settimeout(5)
    try:
        return s.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# The routes only the control port serves: on either path a trickled body goes there, so
# these run on the Python path alone; /v1/rerank, which the data port serves, on both.
CONTROL_ROUTES = [
    ("POST", "/v1/banlist/entries"),
    ("DELETE", "/v1/banlist/entries/1"),
    ("POST", "/v1/banlist/import"),
    ("PUT", "/v1/banlist/groups/acme"),
    ("POST", "/v1/sanctions/scores"),
    ("POST", "/v1/sanctions/a.example/clear"),
    ("POST", "/v1/admin/banlist/reseed"),
]
FRAMINGS = ["content-length", "chunked"]


@pytest.mark.python_path("the data port serves none of these routes: both paths would send "
                         "them to the control port")
@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(("method", "path"), CONTROL_ROUTES)
def test_a_trickling_body_gets_408_and_the_connection_is_closed(ports, method, path,
                                                                framing):
    assert_trickled_body_refused(ports[0], method, path, framing)


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_trickling_rerank_body_gets_408_and_the_connection_is_closed(port, framing):
    assert_trickled_body_refused(port, "POST", "/v1/rerank", framing)


def assert_trickled_body_refused(port: int, method: str, path: str, framing: str) -> None:
    """A body trickled to `method path` on `port` is answered 408 and the connection closed."""
    length = b"Content-Length: 1000\r\n" if framing == "content-length" else (
        b"Transfer-Encoding: chunked\r\n")
    with connect(port) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: t\r\n{AUTH}".encode()
                  + b"Content-Type: application/json\r\n" + length + b"\r\n"
                  + (b"" if framing == "content-length" else b"3e8\r\n"))
        reply = trickle(s, b'{"reason": "' + b"x" * BUDGET)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), reply[:300]
    assert b"connection: close" in head.lower()
    answer = json.loads(body)
    assert answer["field"] == "body" and answer["error"] == "invalid_request"
    assert "0.5 s" in answer["problem"]


@pytest.mark.parametrize("size", [b"zz", b"f" * 18, b"-1"])
def test_a_malformed_chunk_is_the_400_of_an_unreadable_request(port, size):
    # The data port took a bad chunk size line for a client gone and sent 499, a status
    # nginx logs and never sends; the control port answers 400 with the error body.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + size + b"\r\n{}\r\n0\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"connection: close" in head.lower()
    assert json.loads(body)["field"] == "request"


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_client_that_stops_sending_mid_body_is_closed_without_an_answer(port, framing):
    # Half-closed mid-body: the data port wrote `HTTP/1.1 499` to a client still reading,
    # a status meant only to be counted; the control port closes without an answer.
    length = b"Content-Length: 100\r\n" if framing == "content-length" else (
        b"Transfer-Encoding: chunked\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  + length + b"\r\n" + (b"" if framing == "content-length" else b"64\r\n")
                  + b'{"documents": [')
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply == b""


def test_headers_that_never_complete_are_closed(port):
    with connect(port) as s:
        s.sendall(b"POST /v1/banlist/entries HTTP/1.1\r\nHost: t\r\n")
        reply = trickle(s, b"X-Slow: " + b"x" * BUDGET)
        assert reply == b""  # no request to answer: the connection is just closed
        assert closed_by_server(s)


def test_a_connection_that_sends_nothing_is_closed(port):
    with connect(port) as s:
        assert closed_by_server(s)


def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline(port):
    """After a response, blank lines or the next headers a byte at a time do not hold the
    connection either (each byte would otherwise disarm uvicorn's keep-alive timer)."""
    for slow in (b"\r\n" * (BUDGET // 2), b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"x" * BUDGET):
        with connect(port) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert response(s).startswith(b"HTTP/1.1 200")
            s.settimeout(STEP)
            assert trickle(s, slow) == b""
            assert closed_by_server(s)


def test_slow_headers_behind_a_pipelined_request_are_closed_after_its_answer(port):
    with connect(port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /healthz HTTP/1.1\r\n")
        reply = trickle(s, b"X-Slow: " + b"x" * BUDGET)  # the answer, then the close
    assert reply.startswith(b"HTTP/1.1 200") and reply.count(b"HTTP/1.1") == 1


def test_healthy_clients_are_not_cut(port, ports):
    """Headers in several packets, keep-alive requests, and bodies that come whole."""
    with connect(port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        time.sleep(STEP)  # a second packet well within the deadline
        s.sendall(b"Host: t\r\n\r\n")
        assert response(s).startswith(b"HTTP/1.1 200")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c, \
            httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=5) as control:
        for _ in range(3):  # one kept-alive connection each
            assert c.post("/v1/rerank", json=PAGE).status_code == 200
            r = control.post("/v1/banlist/entries", headers={"Authorization": "Bearer t"},
                             json={"scope": "host", "value": "whole.example", "reason": "spam"})
            assert r.status_code in (200, 201), r.text


@pytest.mark.python_path("bytes hyper cannot parse get hyper's own answer (docs/architecture.md)")
def test_a_request_line_past_the_parsers_limit_gets_the_json_error_body(port):
    """uvicorn answers bytes httptools refuses (here a query string of 100 KiB) with plain
    text; ours is the contract's JSON error, as every other 4xx."""
    with connect(port) as s:
        s.sendall(b"GET /v1/banlist/lookup?url=http://a.example/" + b"a" * 100_000 +
                  b" HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = response(s).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head
        refused = json.loads(body)
        assert refused["error"] == "invalid_request" and refused["field"] == "request"
        assert "64 KiB" in refused["problem"]
        assert closed_by_server(s)
