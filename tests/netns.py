"""A test host of the suite's own: a network namespace joined to the root one by a veth pair,
and a partition of that link that drops packets silently, in both directions.

A partition is not a killed peer: nothing answers, nothing is refused, no RST, no ICMP; a
connection simply hears nothing back, and only timeouts notice. `cut(port)` does that to
the TCP packets of one port at both ends' egress: a zero-length queue (`bfifo limit 0`)
under an HTB class that a u32 filter sends them to, so the rest of the link (the tests'
HTTP to a replica in the namespace) keeps flowing. Why not the usual tools:

- `tc ... netem loss 100%`, or a filter's `action drop`: kernels without sch_netem or
  act_gact (this project's CI machine has neither) refuse them;
- `ip link set … down`: the namespace side sees its carrier go, and the root side loses
  its route to the /30, so a reply to the namespace would leave by the default route;
- an iptables DROP in OUTPUT answers the sender with EPERM: not silent.

Dropped at egress, a packet never reaches the other side; the sender's TCP takes it as
lost and retransmits into the same void. Neighbours are permanent entries on both sides,
so no ARP probe fails into an EHOSTUNREACH while the link is cut (a router's ARP does not
fail in a real partition either).

Each namespace gets a /30 of 198.18.0.0/15 (RFC 2544's benchmarking range: no real host
there) that no interface of the root namespace holds, picked under a lock file, and names
with this process's id, so parallel runs on one machine do not clash; one whose process
died is removed by the next run's `Namespace()`.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

IP, TC = shutil.which("ip"), shutil.which("tc")
NET = ipaddress.ip_network("198.18.0.0/15")
PREFIX = "rrns"  # rrns-<pid>-<n>: the namespaces of the process <pid>
LOCK = Path(tempfile.gettempdir()) / "rearrange-netns.lock"
INSIDE = "veth0"  # the namespace's end of the pair
_count = itertools.count()


class Unavailable(RuntimeError):
    """This machine cannot make a namespace: the reason (the tests skip with it)."""


def _run(*argv: str, stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
    return done.stdout


def _ip(*args: str) -> str:
    return _run(str(IP), *args)


def _tc(*args: str, stdin: str | None = None) -> str:
    return _run(str(TC), *args, stdin=stdin)


def check() -> None:
    """Unavailable when this process cannot make namespaces (not root, no iproute2)."""
    if IP is None or TC is None:
        raise Unavailable("needs iproute2's ip and tc (apt-get install iproute2)")
    if os.geteuid() != 0:
        raise Unavailable("needs root to make network namespaces (ip netns add)")


class Namespace:
    """A network namespace with a veth pair to the root namespace on a /30 of its own:
    `host` is the root side's address, `address` the namespace side's. A context manager:
    everything made is removed on leaving, however the test ended."""

    def __init__(self) -> None:
        check()
        n = next(_count)
        self.name = f"{PREFIX}-{os.getpid()}-{n}"
        self.outside = f"rr{os.getpid()}-{n}h"  # ≤ 15 characters: pid_max is 7 digits
        self.host = self.address = ""
        self.cut_port: int | None = None

    def __enter__(self) -> Namespace:
        try:
            with _locked():
                _sweep()
                self._make()
        except subprocess.CalledProcessError as exc:
            self.close()
            raise Unavailable(f"{' '.join(exc.cmd[:4])} failed: {exc.stderr.strip()}") from exc
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _make(self) -> None:
        net = _free_net()
        host, address = (str(a) for a in net.hosts())
        _ip("netns", "add", self.name)
        _ip("link", "add", self.outside, "type", "veth", "peer", "name", INSIDE,
             "netns", self.name)
        _ip("addr", "add", f"{host}/30", "dev", self.outside)
        _ip("link", "set", self.outside, "up")
        _ip("-n", self.name, "addr", "add", f"{address}/30", "dev", INSIDE)
        _ip("-n", self.name, "link", "set", INSIDE, "up")
        _ip("-n", self.name, "link", "set", "lo", "up")
        _ip("neigh", "replace", address, "lladdr", self._mac(inside=True),
             "dev", self.outside, "nud", "permanent")
        _ip("-n", self.name, "neigh", "replace", host, "lladdr", self._mac(inside=False),
             "dev", INSIDE, "nud", "permanent")
        self.host, self.address = host, address

    def _mac(self, inside: bool) -> str:
        where = ("-n", self.name, "link", "show", INSIDE) if inside else (
            "link", "show", self.outside)
        out = _ip("-o", *where)
        return out.split("link/ether ", 1)[1].split()[0]

    def command(self, *argv: str) -> list[str]:
        """`argv` run inside the namespace (Popen's first argument)."""
        return [str(IP), "netns", "exec", self.name, *argv]

    def cut(self, port: int) -> None:
        """Drop every TCP packet to or from `port` on this link, silently, both ways."""
        if self.cut_port is not None:
            raise RuntimeError(f"{self.name} is cut already (port {self.cut_port})")
        _tc("-batch", "-", stdin=_dropping(self.outside, "sport", port))
        _tc("-n", self.name, "-batch", "-", stdin=_dropping(INSIDE, "dport", port))
        self.cut_port = port

    def heal(self) -> None:
        """Let the packets the cut dropped through again."""
        if self.cut_port is None:
            return
        _tc("qdisc", "del", "dev", self.outside, "root")
        _tc("-n", self.name, "qdisc", "del", "dev", INSIDE, "root")
        self.cut_port = None

    def dropped(self) -> int:
        """Packets the cut dropped so far, both ends (0 when not cut)."""
        if self.cut_port is None:
            return 0
        return (_drops(_tc("-s", "qdisc", "show", "dev", self.outside))
                + _drops(_tc("-n", self.name, "-s", "qdisc", "show", "dev", INSIDE)))

    def close(self) -> None:
        """Remove the pair and the namespace (a process still inside keeps the namespace
        alive until it exits: stop it first)."""
        _remove(self.name, self.outside)


def _dropping(dev: str, direction: str, port: int) -> str:
    """tc batch lines sending `dev`'s TCP packets with that port (`sport` or `dport`) to a
    queue of length zero, and everything else past it."""
    return "\n".join((
        f"qdisc add dev {dev} root handle 1: htb default 1",
        f"class add dev {dev} parent 1: classid 1:1 htb rate 10gbit quantum 1514",
        f"class add dev {dev} parent 1: classid 1:2 htb rate 10gbit quantum 1514",
        f"qdisc add dev {dev} parent 1:2 handle 2: bfifo limit 0",
        f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff "
        f"match ip {direction} {port} 0xffff classid 1:2",
    )) + "\n"


def _drops(stats: str) -> int:
    """The drops tc counted on the zero-length queue (`bfifo 2:`)."""
    text = stats.split("qdisc bfifo 2:", 1)
    if len(text) < 2:
        return 0
    return int(text[1].split("dropped ", 1)[1].split(",", 1)[0])


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Held while a namespace is made or swept: two runs never pick the same /30."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _free_net() -> ipaddress.IPv4Network:
    """The first /30 of NET that no interface of the root namespace holds an address in."""
    taken = set()
    for line in _ip("-4", "-o", "addr", "show").splitlines():
        address = ipaddress.ip_interface(line.split(" inet ", 1)[1].split()[0]).ip
        if address in NET:
            taken.add(ipaddress.ip_network(f"{address}/30", strict=False))
    for net in NET.subnets(new_prefix=30):
        if net not in taken:
            return net
    raise Unavailable(f"every /30 of {NET} is in use")


def _sweep() -> None:
    """Remove the namespaces (and pairs) left by a test process that died before its
    cleanup ran (SIGKILL, a lost machine)."""
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid != os.getpid() and not _alive(pid):
            _remove(name, f"rr{pid}-{parts[2]}h")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _remove(name: str, outside: str) -> None:
    """Delete the pair (both ends go with either) and the namespace, whichever exist."""
    links = subprocess.run([str(IP), "link", "show", outside], capture_output=True)
    if links.returncode == 0:
        _ip("link", "del", outside)
    names = _ip("netns", "list").split()
    if name in names:
        _ip("netns", "del", name)
