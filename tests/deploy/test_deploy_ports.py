"""A replica's two listeners across the deploy files: the data port (POST /v1/rerank, GET
/healthz), which the balancer and the search frontend call, and the control port (every
route: the admin API, the inspector, /metrics, /readyz), which only Prometheus and operators
reach. The image declares and checks both; compose publishes neither, and nginx's public
server reaches the data ports only; in Kubernetes two Services split them and a
NetworkPolicy fences the control port away from the frontend.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from bench.replicas import Replica, free_port, wait_ready
from bench.replicas import start as start_replicas
from bench.replicas import stop as stop_replicas
from tests.deploy import tools
from tests.deploy.nginx_conf import Directive, parse
from tests.deploy.test_deploy_manifests import (
    COMPOSE,
    COMPOSE_DIR,
    DEPLOY,
    bind_mounts,
    container,
    dockerfile_stages,
    exec_form,
    image_env,
    instruction,
    kustomization,
    manifests,
    named,
    published,
    rearrange_services,
)

pytestmark = pytest.mark.python_path("tries both ports itself")

DATA_PORT = int(image_env()["REARRANGE_DATA_PORT"])
CONTROL_PORT = int(image_env()["REARRANGE_PORT"])


# --- the image -------------------------------------------------------------------------------


def test_image_exposes_the_data_and_the_control_port():
    (expose,) = instruction(dockerfile_stages()[-1], "EXPOSE")
    assert DATA_PORT != CONTROL_PORT
    assert sorted(int(p) for p in expose.split()) == sorted([DATA_PORT, CONTROL_PORT])


def healthcheck(control: int, data: int) -> int:
    """The exit code of the image's HEALTHCHECK program, run here against these ports."""
    (check,) = instruction(dockerfile_stages()[-1], "HEALTHCHECK")
    program = exec_form(check.split(" CMD ", 1)[1])
    assert program[0] == "python"  # the image's venv python; this venv's here
    env = {**os.environ, "REARRANGE_PORT": str(control), "REARRANGE_DATA_PORT": str(data)}
    return subprocess.run([sys.executable, *program[1:]], env=env, capture_output=True,
                          timeout=10, check=False).returncode


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Replica, int]]:
    """A live `rearrange serve` on free ports: (the replica, its data port)."""
    data_port = free_port()
    env = {**os.environ, "REARRANGE_DATA_PORT": str(data_port), "REARRANGE_LOG_LEVEL": "warning",
           "REARRANGE_DRAIN_SECONDS": "0"}
    env.pop("REDIS_URL", None)
    (server,) = start_replicas(1, tmp_path_factory.mktemp("replica"), env)
    try:
        wait_ready([server], timeout=30)
        yield server, data_port
    finally:
        stop_replicas([server])


def test_the_healthcheck_fails_while_the_data_port_does_not_answer(replica):
    """A replica whose control port answers but whose data port does not is unhealthy: the
    balancer could not use it."""
    server, _ = replica
    assert healthcheck(control=server.port, data=free_port()) != 0


def test_the_healthcheck_passes_with_both_listeners_and_fails_without_either(replica):
    server, data_port = replica
    assert healthcheck(control=server.port, data=data_port) == 0
    assert healthcheck(control=free_port(), data=data_port) != 0


# --- compose and its balancer -----------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def nginx_source(compose: dict[str, Any]) -> Path:
    (source,) = [s for s, t in bind_mounts(compose["services"]["lb"])
                 if t == "/etc/nginx/nginx.conf"]
    return COMPOSE_DIR / source


def upstreams(http: Directive) -> dict[str, list[str]]:
    """upstream name → its servers' addresses."""
    return {u.args[0]: [s.args[0] for s in u.all("server")] for u in http.all("upstream")}


def server_on(http: Directive, port: int) -> Directive:
    (server,) = [s for s in http.all("server")
                 if int(s.first("listen").args[0].rsplit(":", 1)[-1]) == port]
    return server


def routes(server: Directive) -> dict[str, str]:
    """location → the upstream it proxies to, or `return <code>` for one nginx answers."""
    found = {}
    for location in server.all("location"):
        (what,) = location.all("proxy_pass") + location.all("return")
        target = (urlsplit(what.args[0]).hostname if what.name == "proxy_pass"
                  else f"return {what.args[0]}")
        found[" ".join(location.args)] = target
    return found


def lb_ports(compose: dict[str, Any]) -> tuple[int, int]:
    """(the public server's port, the admin server's port), as the load generator names them:
    the frontend's users at --host, the T&S writer at REARRANGE_ADMIN_URL."""
    loadgen = compose["services"]["loadgen"]
    (host,) = [a.removeprefix("--host=") for a in loadgen["command"] if a.startswith("--host=")]
    admin = loadgen["environment"]["REARRANGE_ADMIN_URL"]
    assert urlsplit(host).hostname == urlsplit(admin).hostname == "lb"
    return urlsplit(host).port or 80, urlsplit(admin).port or 80


def test_the_public_server_reaches_the_data_ports_only(compose):
    http = parse(nginx_source(compose).read_text()).first("http")
    public, _ = lb_ports(compose)
    pools = upstreams(http)
    got = routes(server_on(http, public))
    proxied = {location: target for location, target in got.items()
               if not target.startswith("return ")}
    (pool,) = set(proxied.values())
    assert list(proxied) == ["= /v1/rerank", "= /v1/feedback"], \
        "the public server proxies the frontend's two routes alone"
    assert sorted(pools[pool]) == sorted(f"{n}:{DATA_PORT}" for n in rearrange_services(compose))
    assert got["/"] == "return 404", "anything else is answered by nginx, never proxied"


def test_the_admin_server_reaches_every_control_port(compose):
    http = parse(nginx_source(compose).read_text()).first("http")
    _, admin = lb_ports(compose)
    pools = upstreams(http)
    assert set(routes(server_on(http, admin))) == {"/"}
    pool = routes(server_on(http, admin))["/"]
    assert sorted(pools[pool]) == sorted(f"{n}:{CONTROL_PORT}"
                                         for n in rearrange_services(compose))


def test_compose_publishes_no_replica_port_and_the_admin_server_on_loopback_only(compose):
    for name, service in rearrange_services(compose).items():
        assert "ports" not in service and "network_mode" not in service, name
    public, admin = lb_ports(compose)
    lb = {inside: address for address, _, inside in published(compose["services"]["lb"])}
    assert set(lb) == {public, admin}
    assert lb[admin] == "127.0.0.1", "the admin server is for the host's operators only"


def test_nginx_accepts_the_balancer_config(compose, tmp_path):
    """`nginx -t` on a copy that runs here: the replicas' names (which only resolve on the
    compose network) as 127.0.0.1, and nginx's working files in tmp_path."""
    tool = tools.nginx()
    text = re.sub(r"(^\s*server\s+)[\w.-]+(:\d+)", r"\g<1>127.0.0.1\2",
                  nginx_source(compose).read_text(), flags=re.M)
    scratch = "".join(f"    {kind}_temp_path {tmp_path / kind};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    text = text.replace("http {\n", "http {\n" + scratch, 1)
    copy = tmp_path / "nginx.conf"
    copy.write_text(text)
    done = subprocess.run([tool, "-t", "-c", str(copy), "-p", str(tmp_path),
                           "-g", f"pid {tmp_path / 'nginx.pid'}; error_log stderr;"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_nginx_reader_sees_a_proxied_admin_route():
    """The check above can fail: a public server that also proxies /v1/admin is caught."""
    text = """http { upstream c { server r:8080; } upstream d { server r:8081; }
                     server { listen 80; location = /v1/rerank { proxy_pass http://d; }
                              location /v1/admin { proxy_pass http://c; } } }"""
    got = routes(server_on(parse(text).first("http"), 80))
    assert got == {"= /v1/rerank": "d", "/v1/admin": "c"}


# --- Kubernetes -------------------------------------------------------------------------------


def test_every_port_a_manifest_names_is_a_named_port_of_the_container():
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert ports == {"data": DATA_PORT, "control": CONTROL_PORT}
    named_refs = [p["targetPort"] for s in named("Service").values() for p in s["spec"]["ports"]]
    named_refs += [container()[probe]["httpGet"]["port"]
                   for probe in ("startupProbe", "readinessProbe", "livenessProbe")]
    named_refs += [p["port"] for policy in named("NetworkPolicy").values()
                   for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    # by name, never by number: a port renumbered in the image stays one edit
    assert all(isinstance(ref, str) and ref in ports for ref in named_refs), named_refs
    annotations = manifests()["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == ports["control"], "/metrics is there"


def test_each_service_exposes_one_of_the_two_ports():
    exposed = {name: {p["targetPort"] for p in service["spec"]["ports"]}
               for name, service in named("Service").items()}
    assert exposed == {"rearrange": {"data"}, "rearrange-admin": {"control"}}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "matchLabels only: what this check reads"
    return selector.get("matchLabels", {}).items() <= labels.items()


def allowed_ports(namespace: str, namespace_labels: dict[str, str],
                  pod_labels: dict[str, str]) -> set[str]:
    """The Rearrange pod ports a pod of `namespace` may connect to, by the NetworkPolicies:
    a peer with a namespaceSelector matches pods of the namespaces it selects, one without
    matches pods of the policy's own namespace; the API server labels every namespace with
    its name (kubernetes.io/metadata.name)."""
    own = kustomization()["namespace"]
    namespace_labels = {**namespace_labels, "kubernetes.io/metadata.name": namespace}
    pods = manifests()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    ports: set[str] = set()
    for policy in named("NetworkPolicy").values():
        spec = policy["spec"]
        if not selects(spec["podSelector"], pods) or "Ingress" not in spec["policyTypes"]:
            continue
        for rule in spec["ingress"]:
            # no `from` is every peer, no `ports` every port: neither is a fence
            assert rule.get("from") and rule.get("ports"), rule
            for peer in rule["from"]:
                assert set(peer) <= {"namespaceSelector", "podSelector"}, peer
                in_namespace = (selects(peer["namespaceSelector"], namespace_labels)
                                if "namespaceSelector" in peer else namespace == own)
                if in_namespace and selects(peer.get("podSelector", {}), pod_labels):
                    ports |= {p["port"] for p in rule["ports"]}
    return ports


FRONTEND = {"rearrange-access": "frontend"}
ADMIN = {"rearrange-access": "admin"}


def test_the_network_policy_selects_the_pods_and_fences_the_control_port():
    (policy,) = named("NetworkPolicy").values()
    pods = manifests()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["spec"]["podSelector"], pods)
    assert policy["spec"]["podSelector"]["matchLabels"], "not every pod of the namespace"
    cases: list[tuple[str, dict[str, str], dict[str, str], set[str]]] = [
        # a pod of this namespace, with these labels and these: the ports it may reach
        ("search", FRONTEND, {**FRONTEND, "app": "frontend"}, {"data"}),
        ("monitoring", {}, {"app.kubernetes.io/name": "prometheus"}, {"control"}),
        ("trust-and-safety", ADMIN, ADMIN, {"control"}),
        ("rearrange", {}, pods, {"control"}),  # a sibling replica
        # a label on the pod alone, or on the namespace alone, opens nothing
        ("search", FRONTEND, {"app": "frontend"}, set()),
        ("sandbox", {}, FRONTEND, set()),
        ("sandbox", {}, ADMIN, set()),
        ("trust-and-safety", ADMIN, {}, set()),
        ("search", FRONTEND, ADMIN, set()),
        ("monitoring", {}, {"app.kubernetes.io/name": "grafana"}, set()),
        ("sandbox", {}, {"app.kubernetes.io/name": "prometheus"}, set()),
        ("rearrange", {}, {"app.kubernetes.io/name": "redis"}, set()),
    ]
    for namespace, namespace_labels, pod_labels, expected in cases:
        got = allowed_ports(namespace, namespace_labels, pod_labels)
        assert got == expected, (namespace, namespace_labels, pod_labels)


def test_the_labels_that_open_a_port_are_documented():
    readme = (DEPLOY / "README.md").read_text()
    for labels in (FRONTEND, ADMIN):
        ((key, value),) = labels.items()
        assert f"{key}: {value}" in readme
