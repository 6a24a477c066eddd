"""Redis as production runs it: a primary, a replica and three Sentinels, all real processes
on free loopback ports, so a test can cut replication, kill the primary and watch Sentinel
promote the replica.

Replication is cut the way a partition would cut it, not through a relay (Sentinel re-points
a replica to the primary's real address, around any relay): the replica authenticates to
its primary as an ACL user of its own, which `cut` switches off and disconnects, so the
replica stays up, lagging, and cannot reconnect.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from bench.replicas import free_port
from tests.redis_server import REDIS_SERVER, RedisServer

SERVICE = "rearrange"
REPLICATOR = ("replicator", "replicator-secret")  # the replica's ACL user on its primary


class Sentinel:
    """One `redis-server --sentinel` process (it rewrites its config file: one of its own)."""

    def __init__(self, directory: Path, primary_port: int, quorum: int) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.conf = self.dir / "sentinel.conf"
        self.conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.dir}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {quorum}\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 4000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n")
        assert REDIS_SERVER is not None
        self.proc = subprocess.Popen([REDIS_SERVER, str(self.conf), "--sentinel"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class SentinelSet:
    """A primary, one replica of it and three Sentinels with quorum 2 watching them."""

    def __init__(self, directory: Path, sentinels: int = 3, quorum: int = 2) -> None:
        user, secret = REPLICATOR
        # Either may be a primary that a replica syncs from: each starts a sync at once, not
        # after the 5 s that let several replicas share a diskless one
        at_once = ("--repl-diskless-sync-delay", "0")
        # append-only, so a primary killed and started again comes back with its own data
        self.primary = RedisServer(directory / "primary", appendonly=True, args=(
            "--user", user, "on", f">{secret}", "~*", "&*", "+@all", *at_once)).start()
        self.replica = RedisServer(directory / "replica", args=(
            "--replicaof", "127.0.0.1", str(self.primary.port),
            "--masteruser", user, "--masterauth", secret, *at_once)).start()
        self.sentinels = [Sentinel(directory / f"sentinel-{n}", self.primary.port, quorum)
                          for n in range(sentinels)]
        self.wait_until(self._watching, "the Sentinels to see the replica and each other")

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def close(self) -> None:
        for s in self.sentinels:
            s.kill()
        self.replica.kill()
        self.primary.kill()

    # ---- what a test does to it --------------------------------------------------------
    def cut(self) -> None:
        """Replication stops: the replica can no longer authenticate, and is disconnected."""
        with self.primary.client() as c:
            c.acl_setuser(REPLICATOR[0], enabled=False)
            c.client_kill_filter(user=REPLICATOR[0])
        self.wait_until(lambda: self.connected_replicas(self.primary) == 0,
                        "the primary to lose its replica")

    def fail_over(self) -> RedisServer:
        """SIGKILL the primary and wait for Sentinel to promote the replica; returns it."""
        self.primary.kill()
        self.wait_until(lambda: self.master_port() == self.replica.port and self._role(
            self.replica) == "master", "Sentinel to promote the replica", 30)
        return self.replica

    def rejoin(self, old: RedisServer, primary: RedisServer) -> None:
        """Make `old`, a primary started again after a failover, a replica of `primary`, as
        Sentinel would: it sends this same REPLICAOF itself, but only once the old primary
        has been up for four of its publish periods and its next INFO, up to an INFO period
        later, says master; nothing of the service's runs in that wait."""
        with old.client() as c:
            c.execute_command("REPLICAOF", "127.0.0.1", str(primary.port))

    def master_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers says."""
        for s in self.sentinels:
            try:
                with s.client() as c:
                    _, port = c.sentinel_get_master_addr_by_name(SERVICE)
                    return int(port)
            except redis.RedisError:
                continue
        return None

    @staticmethod
    def connected_replicas(server: RedisServer) -> int:
        with server.client() as c:
            return len(c.execute_command("ROLE")[2])

    # ---- waiting ---------------------------------------------------------------------------
    def _watching(self) -> bool:
        for s in self.sentinels:
            with s.client() as c:
                master = c.sentinel_master(SERVICE)
                if int(master["num-other-sentinels"]) < len(self.sentinels) - 1:
                    return False
                if int(master["num-slaves"]) < 1:
                    return False
        return self.connected_replicas(self.primary) == 1

    @staticmethod
    def _role(server: RedisServer) -> str | None:
        try:
            with server.client() as c:
                return str(c.execute_command("ROLE")[0])
        except redis.RedisError:
            return None

    @staticmethod
    def wait_until(done, what: str, seconds: float = 20) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if done():
                    return
            except redis.RedisError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"waited {seconds} s for {what}")
