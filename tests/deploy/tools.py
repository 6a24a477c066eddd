"""The tools a deploy test runs, found on the PATH; without one the test is skipped, saying
how to install it, and fails under CI (`CI` set), which installs them (.ci/run)."""
from __future__ import annotations

import os
import shutil

import pytest

PROMTOOL_INSTALL = ("apt-get install prometheus (Debian, Ubuntu: it ships promtool) or "
                    "brew install prometheus (macOS)")
NGINX_INSTALL = "apt-get install nginx (Debian, Ubuntu) or brew install nginx (macOS)"


def found(name: str, install: str) -> str:
    """The tool's path, or the test skipped (failed under CI) with the line installing it."""
    tool = shutil.which(name)
    if tool is not None:
        return tool
    if os.environ.get("CI"):
        pytest.fail(f"{name} is missing: .ci/run installs it ({install})")
    pytest.skip(f"{name} is not installed here ({install})")


def promtool() -> str:
    """promtool's path (the alert rules' checks and unit tests, the Prometheus config)."""
    return found("promtool", PROMTOOL_INSTALL)


def nginx() -> str:
    """nginx's path (`nginx -t` on the staging balancer's config)."""
    return found("nginx", NGINX_INSTALL)
