"""The image, the staging compose file (both at the top level) and deploy/'s manifests, as text.

No Docker engine or cluster runs here, so each file is parsed and checked for what would
break a real start: files it references that do not exist, services or ports that do not
line up, manifests the Kubernetes API would refuse (kubernetes-validate, strict), and an
image whose start command is not the README's.
"""
from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
import shlex
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import kubernetes_validate
import pytest
import yaml

from app.api.serving import GRACE_SECONDS
from app.config.load import load_file
from app.config.settings import Settings
from bench.replicas import start as start_replicas
from bench.replicas import stop as stop_replicas
from bench.replicas import wait_ready
from tests.conftest import ROOT
from tests.deploy import tools

pytestmark = pytest.mark.python_path("checks files, sends no request")

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The design card puts the image and the staging stack at the top level (`docker compose up`
# from the root); compose resolves the relative paths in it from the file's own folder.
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_DIR = COMPOSE.parent
START_COMMAND = ["rearrange", "serve"]
# Kubernetes minor versions the manifests must be valid for: the oldest we support and the
# newest the validator knows.
K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())


def must_exist(path: Path) -> None:
    rel = path.resolve().relative_to(ROOT).as_posix()
    assert path.exists(), f"{rel} is referenced but missing"


# --- the Dockerfile ------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """[(INSTRUCTION, arguments)] per stage, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text()
    logical, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    stages: list[list[tuple[str, str]]] = []
    for line in logical:
        word, _, rest = line.strip().partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word.upper(), rest.strip()))
    return stages


def instruction(stage: list[tuple[str, str]], name: str) -> list[str]:
    return [args for word, args in stage if word == name]


def exec_form(args: str) -> list[str]:
    assert args.startswith("["), f"use the exec form so signals reach the process: {args}"
    return yaml.safe_load(args)


def test_image_is_multi_stage_slim_and_non_root():
    stages = dockerfile_stages()
    assert len(stages) >= 2, "build and runtime stages"
    final = stages[-1]
    base = instruction(final, "FROM")[0]
    arg_default = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE.read_text())
    image = base.split()[0].replace("${PYTHON_IMAGE}", arg_default[1] if arg_default else "")
    assert "slim" in image, image
    user = instruction(final, "USER")
    assert user, "the runtime stage must switch user"
    uid = user[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root uid (runAsNonRoot checks it)"


def test_image_has_a_healthcheck_on_healthz():
    """Of both listeners (tests/deploy/test_deploy_ports.py runs it against a live server)."""
    (check,) = instruction(dockerfile_stages()[-1], "HEALTHCHECK")
    assert "/healthz" in check and "CMD" in check
    assert "REARRANGE_PORT" in check and "REARRANGE_DATA_PORT" in check


def test_image_starts_with_the_readme_command():
    (cmd,) = instruction(dockerfile_stages()[-1], "CMD")
    assert exec_form(cmd) == START_COMMAND
    assert instruction(dockerfile_stages()[-1], "ENTRYPOINT") == []
    command = " ".join(START_COMMAND)
    assert f"`{command}`" in (ROOT / "README.md").read_text()
    assert f"`{command}`" in (DEPLOY / "README.md").read_text()


def dev_packages() -> list[str]:
    """Distribution names of the dev extra, the project's own extras it pulls in expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def names(extra: str) -> list[str]:
        found = []
        for requirement in extras[extra]:
            name = re.split(r"[<>=!~\[ ;]", requirement)[0]
            if name == project["name"]:  # "rearrange[audit]": that extra's packages
                for inner in re.findall(r"\[(.*?)\]", requirement)[0].split(","):
                    found += names(inner.strip())
            else:
                found.append(name)
        return found

    return names("dev")


def pip_installs(run: str) -> list[tuple[str, list[str]]]:
    """(the pip that installs, its targets) of each `pip install` in a RUN."""
    found = []
    for command in run.split("&&"):
        words = shlex.split(command.strip())
        if words and words[0].rsplit("/", 1)[-1] == "pip" and "install" in words:
            at = words.index("install")
            found.append((words[0], [w for w in words[at + 1:] if not w.startswith("-")]))
    return found


def test_image_installs_no_dev_dependencies():
    runs = [args for stage in dockerfile_stages() for args in instruction(stage, "RUN")]
    installs = [install for run in runs for install in pip_installs(run)]
    assert installs, "the package is installed with pip"
    build_tools = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for pip, targets in installs:
        if pip.startswith("/opt/build/"):  # the PGO build's own venv: its build backend only
            assert targets and all(t in build_tools for t in targets), targets
            continue
        assert pip == "/opt/venv/bin/pip", f"install into the runtime venv: {pip}"
        # the package itself, or the PGO build's wheel of it: never an extra or a dev tool
        assert targets in (["."], ["/tmp/wheels/rearrange-*.whl"]), targets
    for run in runs:
        assert "[dev]" not in run and "[load]" not in run, run
        runtime_part = " ".join(c for c in run.split("&&") if "/opt/build/bin/pip" not in c)
        for package in dev_packages():
            if package == "maturin" and "PATH=/opt/build/bin" in run:
                continue  # run from /opt/build by bench.pgo, never installed in /opt/venv
            assert not re.search(rf"\b{re.escape(package)}\b", runtime_part), f"{package}: {run}"
    final = dockerfile_stages()[-1]
    copied = " ".join(instruction(final, "COPY"))
    assert "/opt/venv" in copied and "/opt/build" not in copied, copied


def test_image_ships_the_pgo_build():
    """The build stage builds the engine with bench.pgo and installs that wheel over the plain
    one: the figures of docs/speed.md are the PGO build's."""
    (build,) = [stage for stage in dockerfile_stages()
                if any("bench.pgo" in args for args in instruction(stage, "RUN"))]
    runs = instruction(build, "RUN")
    pgo = next(r for r in runs if "bench.pgo" in r)
    assert "rustup component add llvm-tools" in pgo
    steps = [c.strip() for c in pgo.split("&&")]
    made = next(i for i, c in enumerate(steps) if "-m bench.pgo --wheel-dir /tmp/wheels" in c)
    installed = next(i for i, c in enumerate(steps)
                     if "--force-reinstall /tmp/wheels/rearrange-" in c)
    assert made < installed
    copied = [args.split()[:-1] for args in instruction(build, "COPY")]
    sources = {s for args in copied for s in args if not s.startswith("--")}
    assert {"bench/__init__.py", "bench/pages.py", "bench/pgo.py", "config"} <= sources


def dockerignored(rel: str) -> bool:
    """Docker's rule: the last .dockerignore pattern matching a path decides."""
    ignored = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel.split("/")[0], pattern):
            ignored = not negate
    return ignored


def test_image_copies_only_what_exists_and_is_in_the_context():
    for stage in dockerfile_stages():
        for args in instruction(stage, "COPY"):
            if args.startswith("--from"):
                continue
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), source
                assert not dockerignored(source), f"{source} is excluded by .dockerignore"
    for heavy in (".venv", ".git", "var", "tests", "bench", "deploy", "target"):
        assert dockerignored(heavy), f"{heavy} would be sent to the Docker daemon"


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for args in instruction(dockerfile_stages()[-1], "ENV"):
        for pair in shlex.split(args):
            key, _, value = pair.partition("=")
            env[key] = value
    return env


# --- the staging compose file ---------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def rearrange_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items()
            if s.get("build", {}).get("dockerfile") == "Dockerfile"}


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    mounts = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts.append((source, target))
    return mounts


def test_compose_builds_from_files_that_exist(compose):
    for name, service in compose["services"].items():
        assert "image" in service or "build" in service, name
        if "build" in service:
            context = COMPOSE_DIR / service["build"]["context"]
            assert context.is_dir(), name
            assert (context / service["build"]["dockerfile"]).is_file(), name


def test_compose_mounts_exist_and_named_volumes_are_declared(compose):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in compose["services"].items():
        for source, target in bind_mounts(service):
            assert target.startswith("/"), f"{name}: {target}"
            if source.startswith((".", "/")):
                must_exist(COMPOSE_DIR / source)
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert declared == used, f"declared but unused: {declared - used}"


def test_compose_depends_on_defined_healthy_services(compose):
    services = compose["services"]
    dockerfile_has_healthcheck = bool(instruction(dockerfile_stages()[-1], "HEALTHCHECK"))
    for name, service in services.items():
        deps = service.get("depends_on", {})
        items = deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)
        for dep, spec in items:
            assert dep in services, f"{name} depends on undefined {dep}"
            if spec.get("condition") == "service_healthy":
                target = services[dep]
                has_check = "healthcheck" in target or (
                    target.get("build", {}).get("dockerfile") == "Dockerfile"
                    and dockerfile_has_healthcheck)
                assert has_check, f"{name} waits for {dep} to be healthy; it has no healthcheck"


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each `ports:` entry ("" = every address)."""
    found = []
    for entry in service.get("ports", []):
        *address, host, inside = str(entry).split(":")
        found.append((address[0] if address else "", int(host), int(inside)))
    return found


def test_compose_host_ports_are_unique(compose):
    ports = [host for s in compose["services"].values() for _, host, _ in published(s)]
    assert len(ports) == len(set(ports)), ports


def test_compose_runs_three_replicas_with_the_rules_mounted(compose):
    """Three replicas of the image, each with the rules as a directory (hot reload). Their
    Redis, its Sentinels and REDIS_URL: tests/deploy/test_deploy_redis.py."""
    replicas = rearrange_services(compose)
    assert len(replicas) == 3
    for name, service in replicas.items():
        assert "command" not in service and "entrypoint" not in service, \
            f"{name}: the image's CMD (the README's `rearrange serve`) starts it"
        assert service["environment"]["REDIS_URL"], f"{name}: the staging stack runs on Redis"
        config_dir = service["environment"]["REARRANGE_CONFIG"].rsplit("/", 1)[0]
        sources = {target: source for source, target in bind_mounts(service)}
        assert config_dir in sources, "the rules are mounted as a directory (hot reload)"
        assert (COMPOSE_DIR / sources[config_dir] / "rules.yaml").is_file()


def test_prometheus_scrapes_every_replica_and_loads_the_alert_rules(compose):
    service = compose["services"]["prometheus"]
    mounts = {t: s for s, t in bind_mounts(service)}
    config = yaml.safe_load((COMPOSE_DIR / mounts["/etc/prometheus/prometheus.yml"]).read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = [t for sc in jobs["rearrange"]["static_configs"] for t in sc["targets"]]
    port = image_env()["REARRANGE_PORT"]
    assert sorted(targets) == sorted(f"{n}:{port}" for n in rearrange_services(compose))
    for rule_file in config["rule_files"]:
        assert rule_file in mounts, f"{rule_file} is not mounted into Prometheus"
        must_exist(COMPOSE_DIR / mounts[rule_file])
    # Redis through the exporter's /scrape?target=: every node and Sentinel, by the address
    # its service listens on, whichever is the primary
    redis_job = jobs["redis"]
    assert redis_job["metrics_path"] == "/scrape"
    relabel = {r["target_label"]: r for r in redis_job["relabel_configs"]}
    assert relabel["__param_target"]["source_labels"] == ["__address__"]
    exporter = relabel["__address__"]["replacement"]
    assert exporter.split(":")[0] in compose["services"], exporter
    scraped = {t for sc in redis_job["static_configs"] for t in sc["targets"]}
    listening = set()
    for name, service in compose["services"].items():
        if service.get("image", "").startswith("redis:"):
            command = service["command"]
            listening.add(f"redis://{name}:{26379 if '--sentinel' in command else 6379}")
    assert scraped == listening
    other = {t.split(":")[0] for j in jobs.values() if j is not redis_job
             for sc in j["static_configs"] for t in sc["targets"]} - {"localhost"}
    assert other <= set(compose["services"]), other


def test_promtool_accepts_the_prometheus_config(compose, tmp_path):
    """What Prometheus itself would refuse (a relabel rule, a bad field): promtool reads a
    copy whose rule files point at the repository's."""
    tool = tools.promtool()
    mounts = {t: s for s, t in bind_mounts(compose["services"]["prometheus"])}
    text = (COMPOSE_DIR / mounts["/etc/prometheus/prometheus.yml"]).read_text()
    for target, source in mounts.items():
        if target.endswith((".yml", ".yaml")) and target != "/etc/prometheus/prometheus.yml":
            text = text.replace(target, str((COMPOSE_DIR / source).resolve()))
    copy_path = tmp_path / "prometheus.yml"
    copy_path.write_text(text)
    done = subprocess.run([tool, "check", "config", str(copy_path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_grafana_provisions_the_datasource_and_the_dashboard(compose):
    services = compose["services"]
    mounts = {t: s for s, t in bind_mounts(services["grafana"])}
    provisioning = COMPOSE_DIR / mounts["/etc/grafana/provisioning"]
    (datasource,) = yaml.safe_load(
        (provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert urlsplit(datasource["url"]).hostname == "prometheus"
    (provider,) = yaml.safe_load(
        (provisioning / "dashboards" / "rearrange.yml").read_text())["providers"]
    folder = provider["options"]["path"]
    volume = mounts[folder]  # a named volume the one-shot step fills
    (writer,) = [n for n, s in services.items() if n != "grafana"
                 and any(src == volume for src, _ in bind_mounts(s))]
    step = services[writer]
    assert services["grafana"]["depends_on"][writer]["condition"] == \
        "service_completed_successfully"
    script = step["command"][-1].replace("$$", "$")  # compose's escape of a literal $
    sed = re.fullmatch(r"sed 's/\[\$\]\{(\w+)\}/([\w-]+)/g' (\S+) > (\S+)", script)
    assert sed, script
    name, uid, source, target = sed.groups()
    assert uid == datasource["uid"]
    step_mounts = {t: s for s, t in bind_mounts(step)}
    dashboard = COMPOSE_DIR / step_mounts[source]
    must_exist(dashboard)
    (written_to,) = [t for s, t in bind_mounts(step) if s == volume]
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert target.startswith(written_to + "/")
    assert home == folder + target.removeprefix(written_to)
    if dashboard.exists():  # every datasource the panels name is the provisioned one
        text = dashboard.read_text().replace("${" + name + "}", uid)
        assert "${DS_" not in text, "a datasource input the step does not substitute"
        refs = {json.dumps(d, sort_keys=True) for d in datasources(json.loads(text))}
        assert refs <= {json.dumps({"type": "prometheus", "uid": uid}, sort_keys=True)}, refs


def datasources(node: Any) -> list[Any]:
    """Every non-null `datasource` value in a dashboard."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k == "datasource" and v is not None]
        return found + [d for v in node.values() for d in datasources(v)]
    if isinstance(node, list):
        return [d for v in node for d in datasources(v)]
    return []


def test_load_generator_runs_the_locustfile_against_the_balancer(compose):
    service = compose["services"]["loadgen"]
    mounts = {t: s for s, t in bind_mounts(service)}
    locustfile = next(a for a in service["command"] if a.endswith(".py"))
    assert (COMPOSE_DIR / mounts[locustfile]).resolve() == ROOT / "bench" / "locustfile.py"
    assert "--host=http://lb" in service["command"]
    assert "REARRANGE_WRITE_TOKEN" in service["environment"]


# --- Kubernetes -------------------------------------------------------------------------------


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def resources() -> list[dict[str, Any]]:
    """Every resource of the files kustomization.yaml lists."""
    return [doc for name in kustomization()["resources"]
            for doc in yaml.safe_load_all((K8S / name).read_text())]


def manifests() -> dict[str, dict[str, Any]]:
    """kind → resource, for the kinds there is one of (the Services: `named`)."""
    kinds = [doc["kind"] for doc in resources()]
    return {doc["kind"]: doc for doc in resources() if kinds.count(doc["kind"]) == 1}


def named(kind: str) -> dict[str, dict[str, Any]]:
    """name → resource, of one kind."""
    return {doc["metadata"]["name"]: doc for doc in resources() if doc["kind"] == kind}


def test_kustomization_lists_every_manifest_and_only_existing_ones():
    listed = set(kustomization()["resources"])
    for name in listed:
        assert (K8S / name).is_file(), name
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == listed, f"not listed: {on_disk - listed}"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifests_pass_the_kubernetes_schema(version):
    for name in kustomization()["resources"]:
        for doc in yaml.safe_load_all((K8S / name).read_text()):
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_check_catches_a_misspelt_field():
    deployment = copy.deepcopy(manifests()["Deployment"])
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    probe["httpGett"] = probe.pop("httpGet")
    with pytest.raises(kubernetes_validate.ValidationError, match="httpGett"):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)


def container() -> dict[str, Any]:
    (c,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return c


def env_of(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c["env"]}


def test_deployment_probes_and_shutdown_sequence():
    c = container()
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    port = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert port == {"data": int(image_env()["REARRANGE_DATA_PORT"]),
                    "control": int(image_env()["REARRANGE_PORT"])}
    # /readyz (and its drain) is the control port's; the liveness probe, and the startup
    # probe that holds it back, ask the data port the frontend calls
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "control"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "data"}
    assert c["startupProbe"]["httpGet"] == c["livenessProbe"]["httpGet"]
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    # After the preStop sleep, SIGTERM: /readyz 503 for REARRANGE_DRAIN_SECONDS while still
    # serving, then both ports' graceful stop lets in-flight requests finish.
    graceful = GRACE_SECONDS
    drain = float(env_of(c).get("REARRANGE_DRAIN_SECONDS", {}).get(
        "value", Settings.model_fields["drain_seconds"].default))
    assert pod["terminationGracePeriodSeconds"] >= int(pre_stop[1]) + drain + graceful, \
        "SIGKILL would cut in-flight requests short"
    assert "command" not in c and "args" not in c, "the image's CMD is the README's command"


def test_deployment_runs_as_the_image_user_with_sized_resources():
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    uid = instruction(dockerfile_stages()[-1], "USER")[-1].split(":")[0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid)
    resources = container()["resources"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(resources[kind]), kind
    assert resources["requests"]["memory"] == resources["limits"]["memory"]


def test_rules_configmap_is_mounted_as_a_directory_and_valid(tmp_path):
    c = container()
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    config_path = env_of(c)["REARRANGE_CONFIG"]["value"]
    directory, filename = config_path.rsplit("/", 1)
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == directory]
    assert "subPath" not in mount, "a subPath mount is never updated: no hot reload"
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = manifests()["ConfigMap"]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    rules = configmap["data"][filename]
    assert rules == (ROOT / "config" / "rules.yaml").read_text()
    copy_path = tmp_path / filename
    copy_path.write_text(rules)
    assert load_file(copy_path).profiles  # the service's own validation accepts it


def test_service_hpa_and_pdb_select_the_deployment():
    m = manifests()
    labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert m["Deployment"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    services = named("Service")
    assert services
    for service in services.values():
        assert service["spec"]["selector"].items() <= labels.items()
    assert m["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = m["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", m["Deployment"]["metadata"]["name"])
    assert m["PodDisruptionBudget"]["spec"]["maxUnavailable"] < \
        m["HorizontalPodAutoscaler"]["spec"]["minReplicas"]
    # The HPA owns the count: a `replicas` here resets a scaled-out Deployment on each apply.
    assert "replicas" not in m["Deployment"]["spec"]


def test_secrets_come_from_kubernetes_secrets():
    """Tokens and the Redis password are never in the repository. The Redis chart and the
    Sentinel URL: tests/deploy/test_deploy_redis.py."""
    env = env_of(container())
    for name in ("REARRANGE_ADMIN_TOKENS", "REDIS_PASSWORD"):
        assert "value" not in env[name], name
        assert env[name]["valueFrom"]["secretKeyRef"]["name"], name


@pytest.mark.parametrize("where", ["k8s", "primary.conf", "replica.conf"])
def test_redis_never_evicts_and_has_a_cap_to_refuse_writes_at(where):
    """noeviction only acts at maxmemory; with none set Redis grows until it is killed."""
    if where == "k8s":
        values = yaml.safe_load((K8S / "redis" / "values.yaml").read_text())
        text = values["commonConfiguration"]
        limit = values["replica"]["resources"]["limits"]["memory"]
        assert limit.endswith("Gi")
        limit_bytes = int(limit[:-2]) * 2**30
    else:
        text = (DEPLOY / "redis" / where).read_text()  # either may be the primary
        limit_bytes = None
    conf = dict(line.split(None, 1) for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith("#"))
    assert conf["maxmemory-policy"] == "noeviction"
    cap = conf["maxmemory"]
    assert re.fullmatch(r"\d+(gb|mb)", cap)
    cap_bytes = int(cap[:-2]) * (2**30 if cap.endswith("gb") else 2**20)
    if limit_bytes is not None:  # half for the data, half for a fork's copy-on-write
        assert cap_bytes <= limit_bytes // 2


def kubelet_write(directory: Path, files: dict[str, str], generation: int) -> None:
    """What the kubelet's atomic writer does to a ConfigMap volume: a new timestamped
    directory, `..data` swapped to it by renaming a symlink, the old directory removed."""
    fresh = directory / f"..2026_11_29_00_00_{generation:02d}.000000001"
    fresh.mkdir()
    for name, text in files.items():
        (fresh / name).write_text(text)
        link = directory / name
        if not link.is_symlink():
            link.symlink_to(Path("..data") / name)
    old = (directory / "..data").resolve() if (directory / "..data").exists() else None
    tmp_link = directory / "..data_tmp"
    tmp_link.symlink_to(fresh.name)
    tmp_link.rename(directory / "..data")
    if old is not None:
        for item in old.iterdir():
            item.unlink()
        old.rmdir()


def test_configmap_symlink_swap_hot_reloads_a_live_server(tmp_path):
    """The Deployment's claim: a ConfigMap update reaches a running `rearrange serve`."""
    volume = tmp_path / "etc-rearrange"
    volume.mkdir()
    kubelet_write(volume, {"rules.yaml": "profiles: {default: {trim: [{depth: {k: 5}}]}}"}, 1)
    env = {**os.environ, "REARRANGE_CONFIG": str(volume / "rules.yaml"),
           "REARRANGE_CONFIG_POLL_SECONDS": "0.2", "REARRANGE_LOG_LEVEL": "warning"}
    env.pop("REDIS_URL", None)
    (server,) = start_replicas(1, tmp_path, env)
    try:
        wait_ready([server], timeout=30)
        page = {"documents": [{"id": f"d{i}", "url": f"http://h{i}.example/", "score": 9 - i}
                              for i in range(9)]}
        assert len(httpx.post(f"{server.url}/v1/rerank", json=page).json()["documents"]) == 5
        kubelet_write(volume, {"rules.yaml": "profiles: {default: {trim: [{depth: {k: 3}}]}}"},
                      2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = httpx.post(f"{server.url}/v1/rerank", json=page).json()["documents"]
            if len(got) == 3:
                break
            time.sleep(0.1)
        assert len(got) == 3, "the swapped ConfigMap was not reloaded"
    finally:
        stop_replicas([server])


def test_image_and_pod_allow_the_same_start_up_time():
    """Both wait as long for a large banlist to load before counting a failed check."""
    (check,) = instruction(dockerfile_stages()[-1], "HEALTHCHECK")
    start_period = re.search(r"--start-period=(\d+)s", check)
    assert start_period, "a start period, or a slow start turns the container unhealthy"
    probe = container()["startupProbe"]
    assert int(start_period[1]) >= probe["periodSeconds"] * probe["failureThreshold"]
