"""A module no test imports: the tests of candidate configs (POST /v1/admin/config/try,
replay, check-config --against) name it and check it is still not in sys.modules after."""
from __future__ import annotations

RULES: list[type] = []
