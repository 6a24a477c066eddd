"""`rearrange serve`: uvicorn with uvloop + httptools, and a drain before every stop."""
from __future__ import annotations

import threading
from types import FrameType

import uvicorn

from app.settings import Settings


class DrainingServer(uvicorn.Server):
    """On SIGTERM, turn /readyz to 503 first and stop only after `drain_seconds`.

    A balancer polling readiness takes the replica out while it still answers, then
    uvicorn's own shutdown lets in-flight requests finish. A second signal during the drain
    cuts it short: the shutdown starts at once (in-flight requests still finish); one after
    that is uvicorn's own (a second Ctrl-C forces the exit).
    """

    def __init__(self, config: uvicorn.Config, service: object, drain_seconds: float) -> None:
        super().__init__(config)
        self.service = service
        self.drain_seconds = drain_seconds
        self._drain: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_seconds <= 0 or self.should_exit:
            super().handle_exit(sig, frame)
            return
        if self._drain is not None:  # a second signal while draining: stop now
            self._drain.cancel()  # else its later handle_exit would force the exit
            super().handle_exit(sig, frame)
            return
        self.service.draining = True  # type: ignore[attr-defined]
        self._drain = threading.Timer(self.drain_seconds, super().handle_exit, (sig, frame))
        self._drain.daemon = True
        self._drain.start()


def serve(settings: Settings, host: str | None, port: int | None, workers: int) -> None:
    """Run the service; with several workers, drain from outside (Kubernetes preStop)."""
    options = dict(host=host or settings.host, port=port or settings.port, loop="uvloop",
                   http="httptools", proxy_headers=False, timeout_graceful_shutdown=10,
                   timeout_keep_alive=5, access_log=settings.access_log,
                   log_level=settings.log_level)
    if workers > 1:
        if not settings.redis_url and not settings.banlist_read_only:
            # Each worker is its own process: with the embedded store each would hold its own
            # copy of the list and append to the one log, and a ban would reach one worker.
            raise SystemExit(
                f"--workers {workers} needs REDIS_URL: the embedded banlist belongs to one "
                "process. Run one worker per replica (the deployment's way), point the workers "
                "at Redis, or set REARRANGE_BANLIST_READ_ONLY=true to serve a frozen list.")
        # uvicorn's supervisor forwards SIGTERM to each worker, which finishes its requests.
        uvicorn.run("app.main:create_app", factory=True, workers=workers, **options)
        return
    from app.main import create_app

    app = create_app(settings)
    DrainingServer(uvicorn.Config(app, **options), app.state.service,
                   settings.drain_seconds).run()
