"""`rearrange serve`: the data port (the engine's own listener, app/api/dataplane.py) and
the control port (uvicorn with uvloop + httptools and a deadline on request headers) in one
process, and a drain of both before every stop."""
from __future__ import annotations

import asyncio
import functools
import socket
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any, TypedDict, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.api import errors
from app.config.settings import Settings

if TYPE_CHECKING:
    from app.api.dataplane import DataPlaneServer
    from app.api.services import Services

GRACE_SECONDS = 10  # requests in flight at a stop finish within this, both ports together


class DrainingServer(uvicorn.Server):
    """On SIGTERM, turn /readyz to 503 first and stop only after `drain_seconds`.

    A balancer polling readiness takes the replica out while it still answers, then
    uvicorn's own shutdown lets in-flight requests finish. A second signal during the drain
    cuts it short: the shutdown starts at once (in-flight requests still finish); one after
    that is uvicorn's own (a second Ctrl-C forces the exit).
    """

    def __init__(self, config: uvicorn.Config, services: Services,
                 drain_seconds: float, data_plane: DataPlaneServer | None = None) -> None:
        super().__init__(config)
        self.services = services
        self.drain_seconds = drain_seconds
        self.data_plane = data_plane
        self._drain: threading.Timer | None = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """The data port's requests finish first, then uvicorn's own shutdown (the control
        port's requests, then the app's lifespan, which closes the services both use), the
        two within GRACE_SECONDS together."""
        if self.data_plane is not None:
            started = time.monotonic()
            await asyncio.to_thread(self.data_plane.stop, GRACE_SECONDS)
            left = GRACE_SECONDS - (time.monotonic() - started)
            # uvicorn's own typing says int; a float is what asyncio's wait takes
            self.config.timeout_graceful_shutdown = max(0.0, left)  # type: ignore[assignment]
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_seconds <= 0 or self.should_exit:
            super().handle_exit(sig, frame)
            return
        if self._drain is not None:  # a second signal while draining: stop now
            self._drain.cancel()  # else its later handle_exit would force the exit
            super().handle_exit(sig, frame)
            return
        self.services.draining.set()
        self._drain = threading.Timer(self.drain_seconds, super().handle_exit, (sig, frame))
        self._drain.daemon = True
        self._drain.start()


class HeaderDeadline(HttpToolsProtocol):
    """httptools' protocol, closing a connection whose request headers are not complete
    `header_timeout` seconds after they started (or after the connection opened).

    uvicorn has no such deadline (its issue #157 lists one, not implemented): its
    `timeout_keep_alive` is armed only once a response is complete and disarmed by any byte
    that arrives, so a client sending its headers a byte at a time, or opening a connection
    and sending nothing, holds the connection as long as it likes. An ASGI middleware cannot
    help: the app is called only once the headers are complete. The timer is armed only when
    a packet leaves headers unfinished (or the connection is new), so a request whose headers
    come in one packet, as nearly all do, costs no timer.
    """

    def __init__(self, *args: Any, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self._header_timer: asyncio.TimerHandle | None = None

    # uvicorn's protocol narrows asyncio.Protocol's BaseTransport to Transport (and ignores
    # the override error itself); this override keeps its signature.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Waiting for headers: no request yet, the last one answered (these bytes start
        # the next, or are blank lines), or a message begun whose headers have not made a
        # request cycle yet (each message begun gets a new scope; its cycle takes it).
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.scope is not self.scope:
            self._arm()
        elif self._header_timer is not None:  # the headers are complete
            self._header_timer.cancel()
            self._header_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes httptools refuses (a malformed request line or header,
        or one past the parser's limits, such as a query string past about 64 KiB): the
        contract's JSON error body, as every other 4xx, instead of uvicorn's plain text."""
        body = errors.body(400, "request", "not an HTTP/1.1 request this server can read: a "
                           "malformed request line or header, or one longer than the parser "
                           "takes (a URL or a header past about 64 KiB)")
        head = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.append(b"content-type: application/json\r\ncontent-length: %d\r\n"
                    b"connection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    def _arm(self) -> None:
        transport = self.transport  # after a WebSocket upgrade it belongs to another protocol
        if (self._header_timer is None and not transport.is_closing()
                and transport.get_protocol() is self):
            self._header_timer = self.loop.call_later(self.header_timeout, self._expired)

    def _expired(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class _Options(TypedDict):
    """What `serve` hands uvicorn, one worker or several."""

    host: str
    port: int
    loop: str
    http: type[asyncio.Protocol]
    proxy_headers: bool
    timeout_graceful_shutdown: int
    timeout_keep_alive: int
    access_log: bool
    log_level: str


def serve(settings: Settings, host: str | None, port: int | None, workers: int,
          data_port: int | None = None) -> None:
    """Run the service: `workers` threads serve the data port, uvicorn the control port.

    One process holds one copy of the banlist index and one set of metrics whatever the
    number of threads (docs/architecture.md); OSError naming the port if the control or
    the data port cannot be bound (both are bound before anything starts).
    """
    # (uvicorn calls `http` as it calls a protocol class: a partial of one will do)
    http = functools.partial(HeaderDeadline, header_timeout=settings.header_timeout_seconds)
    host = host or settings.host
    options = _Options(host=host, port=settings.port if port is None else port, loop="uvloop",
                       http=cast("type[asyncio.Protocol]", http), proxy_headers=False,
                       timeout_graceful_shutdown=GRACE_SECONDS, timeout_keep_alive=5,
                       access_log=settings.access_log, log_level=settings.log_level)
    from app.api.app import create_app
    from app.api.dataplane import DataPlaneServer
    from app.observability.workers import wipe

    if settings.metrics_dir is not None:  # PROMETHEUS_MULTIPROC_DIR set: this process's own
        settings.metrics_dir.mkdir(parents=True, exist_ok=True)
        wipe(settings.metrics_dir)
    control = bind(host, options["port"], "control port")
    app = create_app(settings)
    services = app.state.services
    data_plane = DataPlaneServer(services)
    try:
        data_plane.start(host, settings.data_port if data_port is None else data_port, workers)
    except OSError:
        services.close()
        control.close()
        raise
    try:
        DrainingServer(uvicorn.Config(app, **options), services, settings.drain_seconds,
                       data_plane).run(sockets=[control])
    finally:  # uvicorn may exit without its shutdown
        data_plane.stop(0)


def bind(host: str, port: int, what: str) -> socket.socket:
    """A listening socket on host:port, bound as uvicorn binds its own (SO_REUSEADDR), so a
    busy port is one line naming it (`rearrange: not starting: control port …`, exit 2)
    before anything starts, not uvicorn's log after the start-up."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(f"{what} {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OSError(f"{what} {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
