"""The tools a deploy test runs, found on the PATH; without one the test is skipped, saying
how to install it, and fails under CI (`CI` set), which installs them (.ci/run)."""
from __future__ import annotations

import os
import shutil

import pytest

PROMTOOL_INSTALL = ("apt-get install prometheus (Debian, Ubuntu: it ships promtool) or "
                    "brew install prometheus (macOS)")


def promtool() -> str:
    """promtool's path, or the test skipped (failed under CI) with the line installing it."""
    tool = shutil.which("promtool")
    if tool is not None:
        return tool
    if os.environ.get("CI"):
        pytest.fail(f"promtool is missing: .ci/run installs it ({PROMTOOL_INSTALL})")
    pytest.skip(f"promtool is not installed here ({PROMTOOL_INSTALL})")
