"""bench/http.py's figures: the rounds of a row summed up, the scaling from one serving thread
to more, and the printed table."""
from __future__ import annotations

import math
import statistics
from typing import Any

Run = dict[str, float]


def _ratio(mine: float, theirs: float) -> float:
    """mine / theirs, NaN when theirs is 0 (a server that served nothing)."""
    return mine / theirs if theirs else math.nan


def summarize(runs: dict[str, list[Run]], reference: str) -> dict[str, dict[str, Any]]:
    """Each server's figures from its runs of a row, one run a round.

    req/s, p50, p99 and the cores used are the best run's (highest req/s); CPU per
    request, `rps_median`, `server_cores_median` and `load_cores_median` are the medians
    of the runs; errors are every run's. `rps_x`, `p99_x` and `cpu_x` are the medians of
    each round's ratio to the `reference` server's run of that round: a round's runs share
    whatever the machine was doing then, so a slow spell moves both sides of a ratio, not
    the ratio. `vs_against_x`: Rearrange's (`python`'s) req/s over the --against
    revision's, the same way.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, mine in runs.items():
        pairs = list(zip(mine, runs[reference], strict=True))
        out[name] = {
            **max(mine, key=lambda r: r["rps"]),
            "rps_median": statistics.median(r["rps"] for r in mine),
            "server_cores_median": statistics.median(r["server_cores"] for r in mine),
            "load_cores_median": statistics.median(r["load_cores"] for r in mine),
            "cpu_us": statistics.median(r["cpu_us"] for r in mine),
            "load_cpu_us": statistics.median(r["load_cpu_us"] for r in mine),
            "errors": sum(r["errors"] for r in mine),
            **{f"{k}_x": statistics.median(_ratio(m[key], b[key]) for m, b in pairs)
               for k, key in (("rps", "rps"), ("p99", "p99_ms"), ("cpu", "cpu_us"))}}
    if "against" in runs and "python" in runs:
        pairs = list(zip(runs["python"], runs["against"], strict=True))
        out["python"]["vs_against_x"] = statistics.median(_ratio(m["rps"], a["rps"])
                                                          for m, a in pairs)
    return out


def scaling(rows: list[dict]) -> list[dict]:
    """For each server, profile and page size measured at more than one thread count: req/s
    and CPU per request at the most threads over those at the fewest (linear scaling is
    req/s x = the threads' ratio at a CPU per request x of 1), with the load generator's
    cores in each run (on a 2-core machine it takes part of the second core). All are the
    median runs': a best run is the likelier to be a lucky one, and under --quota a run
    can lose a throttled period more or less."""
    by_key: dict[tuple[str, str, int], dict[int, dict[str, float]]] = {}
    for row in rows:
        for name, figures in row["servers"].items():
            by_key.setdefault((name, row["profile"], row["documents"]), {})[row["threads"]] \
                = figures
    out = []
    for (name, profile, docs), at in by_key.items():
        if len(at) < 2:
            continue
        few, most = at[min(at)], at[max(at)]
        out.append({"server": name, "profile": profile, "documents": docs,
                    "threads": [min(at), max(at)],
                    "rps": [few["rps_median"], most["rps_median"]],
                    "rps_x": _ratio(most["rps_median"], few["rps_median"]),
                    "cpu_x": _ratio(most["cpu_us"], few["cpu_us"]),
                    "load_cores": [few["load_cores_median"], most["load_cores_median"]],
                    "server_cores": [few["server_cores_median"],
                                     most["server_cores_median"]]})
    return out


def _fixed_cells(fixed: dict[str, float] | None) -> str:
    if fixed is None:
        return ""
    return (f" | {fixed['rate']:>8.0f} {fixed['rps']:>8.0f} {fixed['p50_ms']:>6.2f} "
            f"{fixed['p99_ms']:>6.2f} {fixed['p99_over_p50']:>7.2f} {fixed['errors']:>4.0f} "
            f"{fixed['late_p99_ms']:>6.2f} {fixed.get('steal', 0.0):>6.1%}")


def print_row(row: dict, header: bool, fraction: float | None) -> None:
    """One row of the table: a line per server, the row's keys on its first."""
    if header:
        print(f"{'thr':>3} {'profile':>10} {'docs':>5} {'KiB':>6} | {'server':<10} "
              f"{'req/s':>7} {'p50':>6} {'p99':>6} {'err':>4} | {'CPU µs':>7} {'cores':>5} "
              f"{'wrk':>5} | {'req/s x':>7} {'p99 x':>6} {'CPU x':>6}"
              + (f" | {f'@{fraction:.0%} rate':>8} {'req/s':>8} {'p50':>6} {'p99':>6} "
                 f"{'p99/p50':>7} {'err':>4} {'late':>6} {'steal':>6}" if fraction else ""))
    keys = f"{row['threads']:>3} {row['profile']:>10} {row['documents']:>5} {row['kib']:>6.1f}"
    for name, f in row["servers"].items():
        print(f"{keys} | {name:<10} {f['rps']:>7.0f} {f['p50_ms']:>6.2f} {f['p99_ms']:>6.2f} "
              f"{f['errors']:>4.0f} | {f['cpu_us']:>7.1f} {f['server_cores']:>5.2f} "
              f"{f['load_cores']:>5.2f} | {f['rps_x']:>7.2f} {f['p99_x']:>6.2f} "
              f"{f['cpu_x']:>6.2f}" + _fixed_cells(f.get("fixed")), flush=True)
        keys = " " * len(keys)
    if "vs_against_x" in row["servers"].get("python", {}):
        print(f"{'':>28}python / --against REV req/s: "
              f"{row['servers']['python']['vs_against_x']:.2f}x", flush=True)


def print_summary(rss_mib: dict[int, dict[str, float]], scaled: list[dict]) -> None:
    """RSS per server and thread count, and the scaling from the fewest threads to the most."""
    if rss_mib:
        counts = sorted(rss_mib)
        print("\nRSS after serving (MiB, every process of the server): "
              + "; ".join(f"{n} thread(s): " + ", ".join(
                  f"{name} {mib:.0f}" for name, mib in rss_mib[n].items()) for n in counts))
        if len(counts) > 1:
            few, most = counts[0], counts[-1]
            print(f"RSS {most} threads / {few}: " + ", ".join(
                f"{name} {rss_mib[most][name] / rss_mib[few][name]:.2f}x"
                for name in rss_mib[most] if rss_mib[few].get(name)))
    for s in scaled:
        few, most = s["threads"]
        print(f"scaling {s['server']:<10} {s['profile']:>10} {s['documents']:>4} docs: "
              f"req/s {s['rps'][0]:.0f} -> {s['rps'][1]:.0f} ({few} -> {most} threads) = "
              f"{s['rps_x']:.2f}x, CPU/request {s['cpu_x']:.2f}x; server cores "
              f"{s['server_cores'][0]:.2f} -> {s['server_cores'][1]:.2f}, wrk's "
              f"{s['load_cores'][0]:.2f} -> {s['load_cores'][1]:.2f}")
