"""The version is written once (crates/engine/Cargo.toml); everything else reads it."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import yaml
from prometheus_client.parser import text_string_to_metric_families

from app import __version__
from tests.conftest import ROOT


def test_the_crate_holds_the_version_and_the_package_takes_it():
    crate = tomllib.loads((ROOT / "crates" / "engine" / "Cargo.toml").read_text())
    assert __version__ == crate["package"]["version"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]


def test_rearrange_version_prints_it():
    run = subprocess.run([sys.executable, "-m", "app.cli", "--version"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0 and run.stdout == f"rearrange {__version__}\n"


def test_the_openapi_document_and_the_deployed_image_say_it(client):
    assert client.get("/openapi.json").json()["info"]["version"] == __version__
    kustomization = yaml.safe_load((ROOT / "deploy" / "k8s" / "kustomization.yaml").read_text())
    tags = {image["newTag"] for image in kustomization["images"]}
    assert tags == {__version__}


def test_the_build_info_series_says_it(client):
    families = text_string_to_metric_families(client.get("/metrics").text)
    [info] = [f for f in families if f.name == "rearrange_build_info"]
    assert [(s.labels["version"], s.value) for s in info.samples] == [(__version__, 1.0)]


def test_no_other_file_spells_the_version_out():
    spelled = re.compile(r"""version\s*[=:]\s*["']?""" + re.escape(__version__))
    for path in [ROOT / "pyproject.toml", *(ROOT / "app").rglob("*.py")]:
        assert not spelled.search(path.read_text()), path
