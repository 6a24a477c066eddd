"""Redis under Sentinel as deploy/ runs it: staging's compose services and configs, the
Kubernetes chart's values, and the REDIS_URL each hands Rearrange.

No Docker or cluster runs here, so the shape is checked as text (three Sentinels, quorum 2,
watching the primary; the replica following it; the durability settings on every node;
REDIS_URL naming exactly the Sentinels that exist), the environment through the service's
own Settings, and the configs in the real redis-server: a primary, its replica and three
Sentinels started from the compose file's seeds on free local ports.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

import pytest
import redis
import yaml

from app.config.settings import Settings
from bench.replicas import free_port
from tests.deploy.test_deploy_manifests import (
    COMPOSE,
    COMPOSE_DIR,
    DEPLOY,
    K8S,
    bind_mounts,
    container,
    env_of,
    rearrange_services,
)
from tests.redis_server import REDIS_SERVER

VALUES = K8S / "redis" / "values.yaml"
START_SCRIPT = DEPLOY / "redis" / "start.sh"
HEX_PASSWORD = "0f" * 24  # the shape the README's `openssl rand -hex 24` gives


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


# --- reading configs and URLs ---------------------------------------------------------------


def conf_lines(text: str) -> list[list[str]]:
    """A redis.conf's directives in order, each split into words (quotes dropped)."""
    return [[w.strip('"') for w in line.split()] for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def conf(text: str) -> dict[str, str]:
    """Plain `key value` directives (the last one wins, as in Redis)."""
    return {words[0]: " ".join(words[1:]) for words in conf_lines(text) if words[0] != "sentinel"}


def sentinel_directives(text: str) -> dict[str, list[str]]:
    """`sentinel NAME args…` → args; per-master ones keyed `NAME MASTER`."""
    found = {}
    for words in conf_lines(text):
        if words[0] != "sentinel":
            continue
        name, args = words[1], words[2:]
        global_ = name in ("resolve-hostnames", "announce-hostnames", "announce-ip",
                           "announce-port", "deny-scripts-reconfig")
        found[name if global_ else f"{name} {args[0]}"] = args if global_ else args[1:]
    return found


@dataclass(frozen=True)
class SentinelURL:
    """redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB][?OPTIONS],
    read here from CONTRACT.md's form, independently of app/'s reader."""

    sentinels: list[tuple[str, int]]
    service: str
    db: int
    password: str
    options: dict[str, str]


def sentinel_url(url: str) -> SentinelURL:
    scheme, sep, rest = url.partition("://")
    assert (scheme, sep) == ("redis+sentinel", "://"), f"not a redis+sentinel URL: {url}"
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    auth, _, hosts = netloc.rpartition("@")
    sentinels = []
    for address in hosts.split(","):
        host, colon, port = address.rpartition(":")
        assert colon and host and port.isdigit(), f"{address!r} is not HOST:PORT"
        sentinels.append((host, int(port)))
    service, _, db = path.partition("/")
    assert service and (db == "" or db.isdigit()), f"{path!r} is not SERVICE[/DB]"
    return SentinelURL(sentinels, unquote(service), int(db or 0),
                       unquote(auth.partition(":")[2]), dict(parse_qsl(query)))


def test_the_url_reader_reads_the_contracts_form():
    url = sentinel_url("redis+sentinel://:pw@s1:26379,s-2.example:26380/rearrange/3?x=1")
    assert url == SentinelURL([("s1", 26379), ("s-2.example", 26380)], "rearrange", 3, "pw",
                              {"x": "1"})
    assert sentinel_url("redis+sentinel://s1:26379/rearrange").db == 0
    for bad in ("redis://s1:6379/0", "redis+sentinel://s1/rearrange",
                "redis+sentinel://s1:26379/"):
        with pytest.raises(AssertionError):
            sentinel_url(bad)


# --- staging: the compose file ----------------------------------------------------------------


def redis_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items()
            if s.get("image", "").startswith("redis:")}


def is_sentinel(service: dict[str, Any]) -> bool:
    return "--sentinel" in service["command"]


def mounted(service: dict[str, Any], path: str) -> Path:
    """The host file behind `path` in the container: a file or a directory bind mount."""
    for source, target in bind_mounts(service):
        if source.startswith((".", "/")) and (path == target or path.startswith(target + "/")):
            return COMPOSE_DIR / source / path.removeprefix(target).lstrip("/")
    raise AssertionError(f"{path} is not mounted")


def seed(service: dict[str, Any]) -> Path:
    """The config a compose Redis service starts from (start.sh's first argument)."""
    return mounted(service, service["command"][0])


def announced(service: dict[str, Any]) -> str:
    """The name a Sentinel announces (`--sentinel announce-ip NAME` on its command)."""
    command = service["command"]
    at = command.index("announce-ip")
    assert command[at - 1] == "--sentinel", command
    return command[at + 1]


def rearrange_env(compose: dict[str, Any]) -> dict[str, str]:
    (env,) = {yaml.safe_dump(s["environment"]) for s in rearrange_services(compose).values()}
    return yaml.safe_load(env)


def test_compose_runs_a_primary_a_replica_and_three_sentinels(compose):
    services = redis_services(compose)
    sentinels = {n: s for n, s in services.items() if is_sentinel(s)}
    nodes = {n: s for n, s in services.items() if not is_sentinel(s)}
    assert len(sentinels) == 3 and len(nodes) == 2, sorted(services)
    configs = {n: seed(s).read_text() for n, s in services.items()}
    (text,) = {configs[n] for n in sentinels}  # one seed for the three
    directives = sentinel_directives(text)
    (monitor,) = [k for k in directives if k.startswith("monitor ")]
    host, port, quorum = directives[monitor]
    assert host in nodes, f"the Sentinels monitor {host}, not a compose service"
    assert int(quorum) == len(sentinels) // 2 + 1 == 2, "quorum: a majority of the Sentinels"
    followers = [n for n in nodes if conf(configs[n]).get("replicaof") == f"{host} {port}"]
    assert followers and host not in followers, "a replica follows the monitored primary"
    assert conf(configs[host]).get("replicaof") is None
    # Each announces its service name, which survives a recreated container's new address
    for name in nodes:
        assert conf(configs[name])["replica-announce-ip"] == name
    for name, service in sentinels.items():
        assert announced(service) == name


def test_sentinels_resolve_names_and_fail_over_as_the_readme_says(compose):
    (text,) = {seed(s).read_text() for s in redis_services(compose).values() if is_sentinel(s)}
    directives = sentinel_directives(text)
    master = next(k.split()[1] for k in directives if k.startswith("monitor "))
    assert master == "rearrange"
    assert directives[f"down-after-milliseconds {master}"] == ["5000"]
    assert directives[f"failover-timeout {master}"] == ["60000"]
    assert directives[f"parallel-syncs {master}"] == ["1"]
    # A name in the monitor line: refused without resolve-hostnames; handed out as the
    # address it resolved to at start-up without announce-hostnames (the real Sentinels
    # below answer with the name)
    assert directives["resolve-hostnames"] == ["yes"]
    assert directives["announce-hostnames"] == ["yes"]
    assert "myid" not in {words[1] for words in conf_lines(text) if words[0] == "sentinel"}, \
        "a shared seed with an id would give the three Sentinels one id"


def test_every_node_is_durable_and_never_evicts(compose):
    for name, service in redis_services(compose).items():
        if is_sentinel(service):
            continue
        settings = conf(seed(service).read_text())
        assert settings["appendonly"] == "yes", name
        assert settings["appendfsync"] in ("always", "everysec"), name
        assert settings["maxmemory-policy"] == "noeviction", name
        # Inert on a replica, in force once Sentinel promotes it
        assert settings["min-replicas-to-write"] == "1", name
        assert settings["min-replicas-max-lag"] == "10", name


def test_every_redis_keeps_its_rewritten_config_in_its_own_volume(compose):
    """Sentinel rewrites the running config of Sentinels and of the nodes it reconfigures:
    each must start from a writable copy in a volume of its own, not the read-only seed."""
    volumes = []
    for name, service in redis_services(compose).items():
        assert service["entrypoint"] == ["sh", "/usr/local/etc/redis/start.sh"], name
        assert mounted(service, "/usr/local/etc/redis/start.sh") == START_SCRIPT
        (volume,) = [s for s, t in bind_mounts(service) if t == service["working_dir"]]
        assert not volume.startswith((".", "/")), f"{name}: a named volume holds the copy"
        volumes.append(volume)
        assert service["healthcheck"]["test"], name
    assert len(volumes) == len(set(volumes)), "one volume per node and per Sentinel"


def run_start_script(tmp_path: Path, seed_text: str) -> str:
    """start.sh with the image's entrypoint stubbed: what it would have started."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    stub = tmp_path / "bin" / "docker-entrypoint.sh"
    stub.write_text('#!/bin/sh\necho "$@"\n')
    stub.chmod(0o755)
    seed_file = tmp_path / "seed" / "sentinel.conf"
    seed_file.parent.mkdir(exist_ok=True)
    seed_file.write_text(seed_text)
    work = tmp_path / "data"
    work.mkdir(exist_ok=True)
    done = subprocess.run(["sh", str(START_SCRIPT), str(seed_file), "--sentinel"], cwd=work,
                          env={**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


def test_start_script_copies_the_seed_once_and_keeps_what_sentinel_wrote(tmp_path):
    work = tmp_path / "data"
    started = run_start_script(tmp_path, "port 26379\n")
    assert started == f"redis-server {work}/sentinel.conf --sentinel"
    assert (work / "sentinel.conf").read_text() == "port 26379\n"
    (work / "sentinel.conf").write_text("port 26379\nsentinel myid abc\n")  # Sentinel's rewrite
    run_start_script(tmp_path, "port 26379\n")
    assert (work / "sentinel.conf").read_text() == "port 26379\nsentinel myid abc\n"


def test_rearrange_follows_the_sentinels_of_the_compose_file(compose):
    services = redis_services(compose)
    sentinels = {n: s for n, s in services.items() if is_sentinel(s)}
    url = sentinel_url(rearrange_env(compose)["REDIS_URL"])
    (text,) = {seed(s).read_text() for s in sentinels.values()}
    port = int(conf(text)["port"])
    assert sorted(url.sentinels) == sorted((name, port) for name in sentinels), \
        "REDIS_URL lists every Sentinel of the compose file, and only those"
    (monitor,) = [k for k in sentinel_directives(text) if k.startswith("monitor ")]
    assert url.service == monitor.split()[1]
    deps = {n for s in rearrange_services(compose).values() for n in s["depends_on"]}
    assert set(services) <= deps, "Rearrange starts once every node and Sentinel is healthy"


# --- Kubernetes: the chart's values and the Deployment ----------------------------------------


def test_the_chart_runs_three_nodes_each_with_a_sentinel(values):
    assert values["architecture"] == "replication"
    sentinel = values["sentinel"]
    assert sentinel["enabled"] is True
    nodes = values["replica"]["replicaCount"]
    assert nodes == 3, "a primary and two replicas: one lost, a write still reaches a replica"
    assert sentinel["quorum"] == nodes // 2 + 1, "quorum: a majority of the Sentinels"
    assert sentinel["downAfterMilliseconds"] == 5000
    assert sentinel["failoverTimeout"] == 60000
    assert sentinel["parallelSyncs"] == 1
    assert values["useHostnames"] is True, "names, not pod IPs, in Sentinel's answers"
    assert values["replica"]["podAntiAffinityPreset"] == "hard", "one Redis per machine"
    # Rearrange finds the primary through the Sentinels: no -master Service and its RBAC
    assert not sentinel.get("masterService", {}).get("enabled")
    assert not sentinel.get("service", {}).get("createMaster")
    settings = conf(values["commonConfiguration"])
    assert settings["appendonly"] == "yes" and settings["appendfsync"] in ("always", "everysec")
    assert settings["maxmemory-policy"] == "noeviction"
    assert settings["min-replicas-to-write"] == "1" and settings["min-replicas-max-lag"] == "10"


def test_the_deployment_follows_the_charts_sentinels(values):
    env = env_of(container())
    password = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password["name"] == values["auth"]["existingSecret"]
    assert password["key"] == values["auth"]["existingSecretPasswordKey"]
    names = [e["name"] for e in container()["env"]]
    assert names.index("REDIS_PASSWORD") < names.index("REDIS_URL"), \
        "$(REDIS_PASSWORD) expands only a variable defined before it"
    url = sentinel_url(env["REDIS_URL"]["value"])
    # The chart's names: StatefulSet <fullname>-node behind Service <fullname>-headless,
    # a Sentinel in every pod of it
    full = values["fullnameOverride"]
    pods = [f"{full}-node-{i}.{full}-headless" for i in range(values["replica"]["replicaCount"])]
    port = values["sentinel"]["containerPorts"]["sentinel"]
    assert url.sentinels == [(pod, port) for pod in pods]
    assert url.service == values["sentinel"]["masterSet"]
    assert url.password == "$(REDIS_PASSWORD)"
    if values["auth"]["sentinel"]:  # the Sentinels ask for the same password
        assert url.options.get("sentinel_password") == "$(REDIS_PASSWORD)"


def deployment_env() -> dict[str, str]:
    """The Deployment's literal environment, the Secret's password spliced in as the
    kubelet would."""
    env = {e["name"]: e.get("value") for e in container()["env"]}
    env["REDIS_PASSWORD"] = HEX_PASSWORD
    return {k: re.sub(r"\$\(REDIS_PASSWORD\)", HEX_PASSWORD, v) for k, v in env.items()
            if v is not None}


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_the_service_accepts_the_environment_it_is_deployed_with(where, compose, values,
                                                                 monkeypatch):
    """Every REARRANGE_ variable set is a setting the service reads (a misspelt one would be
    ignored), and Settings, the service's own validation, accepts the values."""
    env = rearrange_env(compose) if where == "compose" else deployment_env()
    for name in list(os.environ):
        if name.startswith("REARRANGE_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("REARRANGE_") or name == "REDIS_URL":
            assert name == "REDIS_URL" or \
                name.removeprefix("REARRANGE_").lower() in Settings.model_fields, name
            monkeypatch.setenv(name, str(value))
    assert Settings().redis_url == env["REDIS_URL"]
    # Every acknowledged write waits for a replica, stated rather than left to `auto`, and
    # for no more replicas than there are
    wait = env["REARRANGE_REDIS_WAIT_REPLICAS"]
    assert wait.isdigit(), f"REARRANGE_REDIS_WAIT_REPLICAS={wait}: say how many"
    nodes = (len([s for s in redis_services(compose).values() if not is_sentinel(s)])
             if where == "compose" else values["replica"]["replicaCount"])
    assert 1 <= int(wait) <= nodes - 1
    assert "REARRANGE_REDIS_WAIT_MS" in env


# --- the configs in the real redis-server -----------------------------------------------------


class Started:
    """redis-server processes started for one test, each killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, text: str, *args: str) -> redis.Redis:
        """`text` as a config file of its own (its `dir` a fresh folder here) and a free
        port on 127.0.0.1: a client once it answers PING."""
        data = self.tmp / name
        data.mkdir()
        # `dir` is applied as it is read (a chdir): point it here, change nothing else
        text, dirs = re.subn(r"^dir .*$", f"dir {data}", text, flags=re.M)
        assert dirs == 1, f"{name} sets its data directory once"
        conf_file = self.tmp / f"{name}.conf"
        conf_file.write_text(text)  # Sentinel needs its file writable: a copy, as start.sh
        port = free_port()
        assert REDIS_SERVER is not None  # tests/conftest.py stops the run before, if not
        log = self.tmp / f"{name}.log"
        with log.open("wb") as out:  # a file: a pipe nobody reads could fill and stall it
            proc = subprocess.Popen(
                [REDIS_SERVER, str(conf_file), *args, "--port", str(port), "--bind",
                 "127.0.0.1"], stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        client = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
        if not until(lambda: proc.poll() is not None or ping(client)) or proc.poll() is not None:
            raise AssertionError(f"redis-server refused {name}'s config: "
                                 f"{log.read_text().strip()[-2000:]}")
        return client

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def until(check: Callable[[], bool], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def servers(tmp_path: Path) -> Iterator[Started]:
    started = Started(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def local(text: str, service: str, address: str, port: int | None = None) -> str:
    """A config with the compose service name `service` (and its port) in its address lines
    replaced by a local one: the only change the configs get here."""
    pattern = rf"^((?:replicaof|sentinel monitor \S+) ){re.escape(service)} \d+"
    text, n = re.subn(pattern, rf"\g<1>{address} {port}", text, flags=re.M)
    assert n == 1, f"one address names {service}"
    return text


@pytest.mark.redis
def test_the_configs_run_a_primary_its_replica_and_three_sentinels(compose, tmp_path):
    """The seeds in the real redis-server: each accepts its file; the primary refuses a
    write until its replica is in sync and then WAIT confirms one; the Sentinels keep the
    primary by name, as configured, and see each other and the replica (a quorum of 3)."""
    services = redis_services(compose)
    sentinels = sorted(n for n, s in services.items() if is_sentinel(s))
    (primary,) = [n for n, s in services.items()
                  if not is_sentinel(s) and "replicaof" not in conf(seed(s).read_text())]
    (replica,) = set(services) - set(sentinels) - {primary}
    with servers(tmp_path) as run:
        # Replication starts at once (not after the 5 s that lets several replicas share a
        # diskless sync), and names its node "localhost", which resolves here
        p = run.start(primary, seed(services[primary]).read_text(),
                      "--repl-diskless-sync-delay", "0", "--replica-announce-ip", "localhost")
        primary_port = p.connection_pool.connection_kwargs["port"]
        with pytest.raises(redis.ResponseError, match="NOREPLICAS"):
            p.set("rearrange:probe", "1")  # min-replicas-to-write: no replica yet
        r = run.start(replica, local(seed(services[replica]).read_text(), primary, "127.0.0.1",
                                     primary_port), "--replica-announce-ip", "localhost")
        assert until(lambda: r.info("replication").get("master_link_status") == "up")
        assert until(lambda: _accepts_a_write(p)), "the primary refuses writes with a replica"
        assert p.execute_command("WAIT", 1, 1000) == 1, "WAIT: the replica holds the write"
        assert r.get("rearrange:probe") == "1"
        clients = []
        for name in sentinels:
            text = local(seed(services[name]).read_text(), primary, "localhost", primary_port)
            clients.append(run.start(name, text, "--sentinel", "--sentinel", "announce-ip",
                                     "localhost"))
        for s in clients:
            assert s.sentinel_get_master_addr_by_name("rearrange") == ("localhost", primary_port)
            master = s.sentinel_master("rearrange")
            assert (master["quorum"], master["down-after-milliseconds"],
                    master["failover-timeout"], master["parallel-syncs"]) == (2, 5000, 60000, 1)
        assert until(lambda: all(_quorum(s).startswith("OK 3 usable") for s in clients)), \
            [_quorum(s) for s in clients]
        assert until(lambda: all(len(s.sentinel_slaves("rearrange")) == 1 for s in clients))


def _accepts_a_write(client: redis.Redis) -> bool:
    try:
        return bool(client.set("rearrange:probe", "1"))
    except redis.ResponseError:
        return False


def _quorum(client: redis.Redis) -> str:
    try:
        return str(client.execute_command("SENTINEL", "CKQUORUM", "rearrange"))
    except redis.ResponseError as exc:
        return str(exc)


@pytest.mark.redis
def test_the_charts_common_configuration_is_one_redis_server_accepts(values, tmp_path):
    with servers(tmp_path) as run:
        client = run.start("chart", values["commonConfiguration"] + "\ndir /data\n")
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("min-replicas-to-write") == {"min-replicas-to-write": "1"}
