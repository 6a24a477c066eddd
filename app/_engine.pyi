"""Types of `app._engine`, the Rust data plane (crates/engine), as its PyO3 bindings take
and return them. Kept by hand: a change to a `#[pyfunction]` or `#[pymethods]` signature
changes this file in the same commit (`make lint` runs mypy's stubtest, which compares
this file with the built module). Names starting with `_` exist here only, for the type
checker.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, TypedDict, TypeVar, final

from app.banlist.index import FilterState
from app.banlist.model import Entry, Match

# What the control plane uses, and nothing else (issue 46's narrow door: at most 16).
__all__ = [
    "__version__", "Engine", "DataPlane", "EngineMetrics", "RuleTimeout", "BanIndex", "NearDupSets",
    "InvalidURL", "canonicalize", "canonicalize_with_host", "canonicalize_bytes",
    "parse_ipv4", "registrable_domain", "is_public_suffix", "wire_schemas", "builtin_rules",
]

__version__: str

# --- the engine (crates/engine/src/engine.rs) -------------------------------------------

# A rule failure for the service's log: (rule, phase, problem, whether it closed the page,
# the profile, the Python rule's exception or None).
_Failure: TypeAlias = tuple[str, str, str, bool, str, BaseException | None]
# An interleaved page served: (request_id, experiment, unit, at (epoch seconds),
# [(document id, team)] in served order), for app/experiments/impressions.py.
_Impression: TypeAlias = tuple[str, str, str, float, list[tuple[str, str]]]

class _Executor(Protocol):
    """What runs Python rules (app/engine/executor.py RuleExecutor)."""

    def call(self, rule: str, fn: Callable[..., Any], args: Sequence[Any],
             timeout: float | None) -> Any: ...

@final
class Engine:
    """One loaded config, rebuilt on each reload and swapped whole."""

    def __new__(cls, spec_json: str, python_rules: Sequence[Callable[..., Any]],
                metrics: EngineMetrics) -> Engine: ...
    @property
    def version(self) -> str: ...
    def cache_stats(
        self,
    ) -> list[tuple[str, Literal["signature", "shingle"], int, int, int, int, int]]: ...
    def rerank(
        self, body: bytes | bytearray, *, banlist: BanIndex | None = None,
        quarantine: BanIndex | None = None, now: float = 0.0,
        budget_seconds: float | None = None, forced: dict[str, str] | None = None,
        forced_by: str | None = None, max_documents: int = 1000,
        max_text_chars: int = 1_000_000, elapsed: float = 0.0,
        clock: Callable[[], float] | None = None, audit_line: bool = True, explain: bool = False,
        executor: _Executor | None = None, defer_python: bool = False,
    ) -> tuple[int, bytes, bytes | None, list[_Failure], _Impression | None] | None: ...

class RuleTimeout(Exception):
    """A Python rule did not return in its time (raised by the executor in its caller)."""

# --- the built-in rules' catalog (crates/engine/src/rules/catalog.rs) -------------------

def builtin_rules(name: str | None = None, params: Mapping[str, Any] | None = None) -> str:
    """No arguments: the catalog as JSON text, [{name, phases, description, params (JSON
    Schema)}]. A rule's `name` and `params`: those parameters checked as the engine builds
    the rule, every default filled (JSON text); ValueError naming the parameter and the
    problem."""

# --- its metrics (crates/engine/src/metrics.rs) -----------------------------------------

class _MetricsSnapshot(TypedDict):
    counters: dict[str, list[tuple[tuple[str, ...], float]]]
    # labels, count per bucket (the last one +Inf), sum
    histograms: dict[str, list[tuple[tuple[str, ...], list[int], float]]]
    bounds: dict[str, list[float] | None]
    unreadable: list[tuple[str, str]]
    # updates not counted, and why (None: none lost)
    lost: tuple[int, str | None]

@final
class EngineMetrics:
    """The engine's counters and histograms; outlives config reloads."""

    def __new__(cls, directory: str | PathLike[str] | None = None) -> EngineMetrics: ...
    def traffic_share(self, key: str, now: float) -> tuple[int, int]: ...
    def traffic_nbytes(self) -> int: ...
    def count_request(self, profile: str, outcome: str) -> None: ...
    def snapshot(self) -> _MetricsSnapshot: ...
    @property
    def path(self) -> Path | None: ...
    @staticmethod
    def buckets() -> dict[str, list[float]]: ...

# --- the data port's listener (crates/engine/src/serve/) --------------------------------

_Drained: TypeAlias = tuple[
    list[bytes],  # audit lines
    list[_Failure],  # rule failures
    list[tuple[bytes, int, str, int, float]],  # captures: (body, status, config, banlist, at)
    list[tuple[str, int, int]],  # responses: (route, status, count)
    list[tuple[str, int]],  # dropped events: (kind, count)
    list[str],  # the listener's own problems, for the log
    list[_Impression],  # interleaved pages served
]

@final
class DataPlane:
    """POST /v1/rerank, POST /v1/feedback and GET /healthz on threads of this process
    (app/api/dataplane.py)."""

    def __new__(cls, *, metrics: EngineMetrics,
                qa: Callable[[str | None, str | None, str | None],
                             tuple[int, bytes, list[tuple[str, str]], list[tuple[str, str]],
                                   str | None, bool]],
                executor: _Executor | None, healthz: bytes, max_body_bytes: int,
                body_timeout: float, body_timeout_text: str, header_timeout: float,
                deadline: float, max_documents: int, max_text_chars: int, audit: bool,
                capture_rate: float,
                feedback: Callable[[bytes], tuple[int, bytes]] | None = None) -> DataPlane: ...
    def publish(self, *, engine: Engine | None = None, banlist: BanIndex | None = None,
                quarantine: BanIndex | None = None) -> None: ...
    def start(self, host: str, port: int, threads: int) -> int: ...
    @property
    def port(self) -> int | None: ...
    def stop(self, grace: float) -> bool: ...
    def wait(self, timeout: float) -> bool: ...
    def drain(self) -> _Drained: ...

# --- the banlist index (crates/engine/src/banlist/py.rs) --------------------------------

_Change: TypeAlias = (
    tuple[Literal["add"], Entry]
    | tuple[Literal["remove"], str]
    | tuple[Literal["group"], str, Iterable[str]]
)
_Domains = TypeVar("_Domains", bound=Iterable[str])

@final
class BanIndex:
    """The banlist index: a snapshot swapped whole by every batch of changes."""

    def __new__(cls, entries: Iterable[Entry] | None = None,
                groups: dict[str, _Domains] | None = None, version: int = 0) -> BanIndex: ...
    @property
    def version(self) -> int: ...
    @property
    def groups(self) -> dict[str, tuple[str, ...]]: ...
    @property
    def counts(self) -> dict[str, int]: ...
    @property
    def filter_state(self) -> FilterState: ...
    @property
    def serial(self) -> int: ...
    def publish_ready_filter(self) -> bool: ...
    def set_group(self, name: str, domains: Iterable[str]) -> None: ...
    def add(self, entry: Entry) -> None: ...
    def add_many(self, entries: Iterable[Entry]) -> None: ...
    def remove(self, entry_id: str) -> Entry | None: ...
    def apply(self, changes: Iterable[_Change], version: int | None = None) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> _EntryIter: ...
    def frozen(self) -> _EntryIter: ...
    def get(self, entry_id: str) -> Entry | None: ...
    def by_value(self, scope: str, value: str) -> tuple[Entry, ...]: ...
    def expired(self, now: float) -> list[Entry]: ...
    def page(self, after: str | None, limit: int, now: float) -> tuple[list[Entry], bool]: ...
    def active_count(self, now: float) -> int: ...
    def select(self, after: str | None, limit: int, now: float, *, scope: str | None = None,
               actor: str | None = None, reason_contains: str | None = None,
               value_suffix: str | None = None, created_before: float | None = None,
               created_after: float | None = None,
               expires_before: float | None = None) -> tuple[list[Entry], bool, int]: ...
    def match(self, canonical: str, host: str, region: str | None,
              now: float) -> Entry | None: ...
    def match_url(self, canonical: str, host: str, region: str | None,
                  now: float) -> Entry | None: ...
    def host_verdict(self, host: str, region: str | None,
                     now: float) -> tuple[Entry | None, bool]: ...
    def domain_keys(self, host: str) -> tuple[str, ...]: ...
    def explain(self, canonical: str, host: str) -> list[Match]: ...
    def dump(self, meta: bytes) -> bytes: ...
    @staticmethod
    def load(data: bytes) -> tuple[BanIndex, bytes, str]: ...
    def digest(self) -> str: ...
    def nbytes(self) -> int: ...

# Not a module attribute: BanIndex's iterators are of this class.
@final
class _EntryIter:
    """The entries of one snapshot, oldest first."""

    def __iter__(self) -> _EntryIter: ...
    def __next__(self) -> Entry: ...

# --- URLs and domains (crates/engine/src/url/python.rs, domain.rs) ----------------------

class InvalidURL(ValueError):
    """A URL that cannot be canonicalized; the message says what is wrong."""

def canonicalize(url: str) -> str: ...
def canonicalize_with_host(url: str) -> tuple[str, str]: ...
def canonicalize_bytes(raw: bytes) -> str: ...
def parse_ipv4(host: str) -> str | None: ...
def registrable_domain(host: str) -> str: ...
def is_public_suffix(name: str) -> bool: ...

# --- the wire's schemas (crates/engine/src/contract/py.rs) -------------------------------

def wire_schemas() -> str: ...

# --- the audit's shingle sets (crates/engine/src/neardup/audit_py.rs) ---------------------

@final
class NearDupSets:
    """A site's shingle sets, added batch by batch; numbers cross as little-endian bytes."""

    def __new__(cls, width: int) -> NearDupSets: ...
    def __len__(self) -> int: ...
    def add(self, texts: Sequence[str], threads: int) -> bytes: ...
    def sign(self, start: int, end: int, k: int, seed: int, threads: int) -> bytes: ...
    def intersections(self, a: bytes, b: bytes, threads: int) -> bytes: ...
    def shared(self, i: int, others: bytes) -> bytes: ...
    def shingles(self, i: int) -> bytes: ...
    def keep_held_by(self, min_pages: int, max_pages: int) -> bytes: ...
    def add_cooccurring(self, texts: Sequence[str], words: NearDupSets, first: int, window: int,
                        threads: int) -> bytes: ...
    def postings(self, pages: bytes, min_pages: int,
                 min_shingles: int) -> tuple[bytes, bytes, bytes, bytes, bytes]: ...
