"""The native data-plane listener's control side: `POST /v1/rerank`, `POST /v1/feedback`
and `GET /healthz` on their own port, served by threads of the engine
(app._engine.DataPlane, hyper on tokio, crates/engine/src/serve/) over the config and the
banlist indexes this process holds.

`DataPlaneServer` builds the listener from the services, publishes to it the Engine and
the indexes in use and each one swapped in later (`ConfigHolder.follow`,
`BanStore.follow_index`; a change applied to an index in place reaches it without a
call), and runs the thread that writes what its requests leave behind: the audit lines,
the rule failures (the failure log), the capture records, the interleaved pages'
impressions (`Services.impressions`) and the response counts. The
serving threads never wait for that thread, nor for the GIL, unless a profile has a
Python rule (a blocking thread runs it, through the executor) or a request carries a QA
header (its token is checked here). A feedback runs the control port's own handler
(app/api/feedback.py `answer`) on a blocking thread of the listener.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
from typing import TYPE_CHECKING

from app import __version__
from app._engine import DataPlane
from app.api import feedback
from app.api.rerank import check_qa
from app.experiments.impressions import from_engine, hand_on

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.api.services import Services

log = logging.getLogger("rearrange.dataplane")
ROUTES = ("/v1/rerank", feedback.ROUTE, "/healthz")  # all the data port serves
DRAIN_WAIT = 1.0  # seconds the writer waits for events before checking whether to stop


class DataPlaneServer:
    """The native listener over `services` (their `auth` checks the QA headers' tokens)."""

    def __init__(self, services: Services) -> None:
        settings = services.rearranger.settings  # the request path's (limits, deadline)
        self.services = services
        self.plane = DataPlane(
            metrics=services.metrics.engine_metrics,
            qa=functools.partial(check_qa, services.auth, services.metrics),
            executor=services.executor,
            healthz=b'{"status":"ok","version":"%s"}' % __version__.encode(),
            max_body_bytes=settings.max_body_bytes,
            body_timeout=settings.body_timeout_seconds,
            body_timeout_text=f"{settings.body_timeout_seconds:g}",  # as the 408 says it
            header_timeout=settings.header_timeout_seconds,
            deadline=settings.deadline_ms / 1000,
            max_documents=settings.max_documents, max_text_chars=settings.max_text_chars,
            audit=services.audit_log is not None,
            capture_rate=0.0 if services.capture is None else services.capture.settings.rate,
            feedback=functools.partial(feedback.answer, services))
        services.config.follow(lambda engine: self.plane.publish(engine=engine.core))
        services.store.follow_index(lambda index: self.plane.publish(banlist=index))
        services.quarantine.follow_index(lambda index: self.plane.publish(quarantine=index))
        self._writer: threading.Thread | None = None
        self._stopping = threading.Event()
        self._drain_lock = threading.Lock()  # one batch written at a time, in order

    @property
    def port(self) -> int | None:
        """The port served, None when not serving."""
        port: int | None = self.plane.port
        return port

    def start(self, host: str, port: int, threads: int) -> int:
        """Serve on `host:port` (0: a free port) with `threads` threads; the port bound.
        OSError (the port is taken, say) before anything is served."""
        bound: int = self.plane.start(host, port, threads)
        self._stopping.clear()
        self._writer = threading.Thread(target=self._write_until_stopped,
                                        name="rearrange-data-writer", daemon=True)
        self._writer.start()
        log.info("data plane: serving POST /v1/rerank on %s:%d with %d thread%s", host, bound,
                 threads, "" if threads == 1 else "s")
        return bound

    def stop(self, grace: float) -> bool:
        """Stop accepting, let requests in flight finish (up to `grace` seconds), write
        what they left; True if every connection closed in time. The writer keeps writing
        during the drain; the listener's stop ends its wait."""
        drained: bool = self.plane.stop(grace)
        self._stopping.set()
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        self.flush()  # what the last requests left after the writer's last batch
        if not drained:
            log.warning("data plane: connections still open after %g s were closed", grace)
        return drained

    def flush(self) -> None:
        """Write what the listener's requests left, now, on this thread: once a response
        has arrived, its audit line, failures and counts are written when this returns."""
        self._write()

    def _write_until_stopped(self) -> None:
        while not self._stopping.is_set():
            # woken for lines, failures or captures; response counts alone are written at
            # least every DRAIN_WAIT seconds (and by every flush)
            self.plane.wait(DRAIN_WAIT)
            self._write()

    def _write(self) -> None:
        with self._drain_lock:
            (lines, failures, captures, responses, dropped, problems,
             impressions) = self.plane.drain()
            services = self.services
            metrics = services.metrics
            # Each sink on its own: one that raises is logged with its cause and the rest of
            # the batch (and every later one) is still written.
            with self._sink("the audit log"):
                audit = services.audit_log
                if audit is not None:
                    for line in lines:
                        audit.emit_line(line)
            with self._sink("the failure log"):
                rearranger = services.rearranger
                for rule, phase, problem, closed, profile, cause in failures:
                    rearranger.failures.failed(rule, phase, problem, closed, profile, cause)
            with self._sink("the capture"):
                if services.capture is not None:
                    for body, status, config_version, banlist_version, at in captures:
                        services.capture.keep(body, status, config_version, banlist_version, at)
            if impressions:  # the sink counts and logs its own failure
                hand_on(services.impressions, [from_engine(i) for i in impressions],
                        metrics.impressions_lost.labels("sink_failed").inc)
            with self._sink("the response counts"):
                for route, status, count in responses:
                    metrics.http_responses.labels(route, str(status)).inc(count)
            for kind, count in dropped:
                if kind == "audit":
                    metrics.audit_dropped.inc(count)
                elif kind == "capture":
                    metrics.capture_dropped.labels("queue_full").inc(count)
                elif kind == "impression":
                    metrics.impressions_lost.labels("queue_full").inc(count)
                log.error("data plane: %d %s event%s dropped: the writer fell behind", count,
                          kind, "" if count == 1 else "s")
            for problem in problems:
                log.error("data plane: %s", problem)

    @contextlib.contextmanager
    def _sink(self, name: str) -> Iterator[None]:
        try:
            yield
        except Exception:  # noqa: BLE001 (logged with its cause, and counted as a dropped event)
            self.services.metrics.housekeeping_errors.labels("data_plane_writer").inc()
            log.exception("data plane: writing to %s failed; the rest of the batch goes on",
                          name)
