"""The config holder's history: every version served with how and by whom, rollback, and
what a file change does after a rollback."""
from __future__ import annotations

import hashlib

import pytest
from prometheus_client import generate_latest

from app.api.errors import status_of
from app.config.versions import HISTORY, ConfigHolder
from app.errors import ConfigError, FieldError
from app.observability.metrics import Metrics

A = b"profiles: {default: {trim: [{depth: {k: 1}}]}}\n"
B = b"profiles: {default: {trim: [{depth: {k: 2}}]}}\n"
C = b"profiles: {default: {trim: [{depth: {k: 3}}]}}\n"


def version(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:16]


@pytest.fixture
def holder(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_bytes(A)
    return ConfigHolder(path, Metrics())


def served(holder: ConfigHolder) -> list[tuple[str, str, str]]:
    return [(v.version, v.how, v.by) for v in holder.history]


def test_every_version_served_is_kept_newest_first_with_how_and_by(holder):
    assert served(holder) == [(version(A), "start", "start")]
    assert holder.current.text == A.decode() and holder.engine.text == A.decode()
    holder.path.write_bytes(B)
    assert holder.reload() == (True, version(B))
    holder.path.write_bytes(C)
    assert holder.reload("reload", "tns") == (True, version(C))
    assert holder.reload("reload", "tns") == (False, version(C))  # same content: no version
    assert served(holder) == [(version(C), "reload", "tns"), (version(B), "file", "file"),
                              (version(A), "start", "start")]
    assert holder.history[1].loaded_at >= holder.history[2].loaded_at


def test_the_history_is_bounded(holder):
    for k in range(2, HISTORY + 12):
        holder.path.write_bytes(f"profiles: {{default: {{trim: [{{depth: {{k: {k}}}}}]}}}}"
                                .encode())
        assert holder.reload()[0] is True
    assert len(holder.history) == HISTORY
    assert holder.current.text.endswith(f"k: {HISTORY + 11}}}}}]}}}}")


def test_rollback_serves_an_earlier_version_and_is_recorded(holder):
    holder.path.write_bytes(B)
    holder.reload()
    changed, record = holder.rollback(version(A), "tns")
    assert changed is True and holder.engine.version == version(A)
    assert (record.version, record.how, record.by) == (version(A), "rollback", "tns")
    assert record.file_version == version(B)  # the file still holds B
    assert holder.rollback(version(A), "tns") == (False, holder.current)
    exposed = generate_latest(holder.events.registry).decode()
    assert f'rearrange_config_info{{version="{version(A)}"}} 1.0' in exposed
    assert exposed.count("rearrange_config_info{") == 1


def test_rollback_to_a_version_never_served_is_404_and_changes_nothing(holder):
    before = holder.engine
    with pytest.raises(FieldError) as info:
        holder.rollback("0123456789abcdef", "tns")
    assert (info.value.field, status_of(info.value)) == ("version", 404)
    assert holder.engine is before and len(holder.history) == 1


def test_rollback_that_would_rebucket_a_running_experiment_is_refused(holder):
    exp = ("profiles: {{default: {{rerank: [spam_demotion]}}}}\nexperiments:\n"
           "  - {{name: e, unit: user_id, variants: {{control: 10, treatment: {}}}, "
           "rules: [spam_demotion]}}\n")
    holder.path.write_text(exp.format(10))
    holder.reload()
    narrow = holder.engine.version
    holder.path.write_text(exp.format(30))
    assert holder.reload()[0] is True  # a ramp: accepted
    with pytest.raises(ConfigError) as info:  # back to 10 % would move treated units out
        holder.rollback(narrow, "tns")
    assert info.value.place == "experiments[0] e" and "re-bucket" in info.value.problem
    assert holder.current.how == "file" and holder.engine.experiments[0].ranges() == {
        "control": (0, 1000), "treatment": (1000, 4000)}
    assert holder.events.config_reloads.labels("refused")._value.get() == 1


def test_a_reload_of_the_unchanged_file_keeps_the_rollback(holder):
    holder.path.write_bytes(B)
    holder.reload()
    holder.rollback(version(A), "tns")
    holder.path.write_bytes(B)  # rewritten as it was (a ConfigMap re-sync, a touch)
    assert holder.changed_on_disk()
    assert holder.reload() == (False, version(A))
    assert holder.reload("reload", "ops") == (False, version(A))
    assert holder.current.how == "rollback"


def test_new_file_content_after_a_rollback_wins_as_a_new_version(holder):
    holder.path.write_bytes(B)
    holder.reload()
    holder.rollback(version(A), "tns")
    holder.path.write_bytes(C)
    assert holder.reload() == (True, version(C))
    assert served(holder)[:2] == [(version(C), "file", "file"), (version(A), "rollback", "tns")]


def test_a_file_edited_to_the_rolled_back_content_adds_no_version(holder):
    holder.path.write_bytes(B)
    holder.reload()
    holder.rollback(version(A), "tns")
    holder.path.write_bytes(A)
    assert holder.reload() == (False, version(A))
    assert holder.file_version == version(A) and holder.current.how == "rollback"
    holder.path.write_bytes(B)  # and back to B: new content for the file, served
    assert holder.reload() == (True, version(B))


def test_a_config_that_is_not_utf8_is_refused_naming_the_file(holder):
    holder.path.write_bytes(b"profiles: {default: {}}\n# caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        holder.reload()
    assert info.value.place == str(holder.path) and "not UTF-8" in info.value.problem
    assert holder.engine.version == version(A)
