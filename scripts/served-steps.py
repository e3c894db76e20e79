#!/usr/bin/env python3
"""What the serving loop's thread did in its steps, by how slow each ran against its table.

    python3 scripts/served-steps.py RUN.served.jsonl

For each rate served and each step kind, the steps with a table time, grouped by their measured
/ table time over the kind's median (bands of 0.1 from 0.8 to 1.4), with the loop thread's CPU
time and its wait to run as shares of the group's wall time: where the slower steps keep the
thread on its CPU, the step's own work took longer (on a CPU device, the host's pace); where
they do not, something took the CPU away (docs/SWEEPS.md, "What the host's pace is"). On a GPU,
where the trace has them (2026-12-06 on), also the steps in which libtorch's caching allocator
called the driver for memory, and its calls. Then the kind's median measured / table time by
batch, and by what came before it: a step of the other kind, one of its own, or an idle gap (the
loop waited for an arrival first; such steps are counted there alone). Reads a trace of a lynx
build that recorded the thread (2026-12-05 on); the steps of older ones are counted, their
shares said to be unknown.
Bad input: one line naming it, exit 2.
"""
import json
import math
import statistics
import sys

BANDS = [(None, 0.8)] + [(0.8 + 0.1 * i, 0.9 + 0.1 * i) for i in range(6)] + [(1.4, None)]


def band_name(low, high):
    if low is None:
        return f"under {high:.1f}"
    if high is None:
        return f"{low:.1f} and over"
    return f"{low:.1f}-{high:.1f}"


def band_of(pace):
    for i, (low, high) in enumerate(BANDS):
        if (low is None or pace >= low - 1e-12) and (high is None or pace < high - 1e-12):
            return i
    return len(BANDS) - 1


def number(step, key, where):
    value = step.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: {key} is not a finite non-negative number")
    return float(value)


def table(trace, where):
    lines = []
    steps = trace.get("steps")
    if not isinstance(steps, list):
        raise ValueError(f"{where}: no list of steps")
    for prefill in (False, True):
        kind = "prefill" if prefill else "decode"
        timed = []
        # Each step's measured / table time by its batch, and by what came before it (a step of
        # either kind, or an idle gap).
        by_batch, by_before = {}, {}
        for i, step in enumerate(steps):
            if not isinstance(step, dict):
                raise ValueError(f"{where}: step {i} is not an object")
            if step.get("prefill") is not prefill:
                continue
            wall, table_s = number(step, "step_s", f"{where} step {i}"), number(step, "table_s", f"{where} step {i}")
            if wall is None or not table_s:
                continue
            cpu = number(step, "thread_cpu_s", f"{where} step {i}")
            waited = number(step, "thread_runnable_s", f"{where} step {i}")
            calls = number(step, "allocator_calls", f"{where} step {i}")
            pace = wall / table_s
            timed.append((pace, wall, cpu, waited, calls))
            batch = step.get("batch")
            batch = batch if isinstance(batch, int) and not isinstance(batch, bool) else "?"
            by_batch.setdefault(batch, []).append(pace)
            before = steps[i - 1] if i > 0 else None
            if step.get("after_idle") is True:
                by_before.setdefault("idle", []).append(pace)
            elif isinstance(before, dict) and isinstance(before.get("prefill"), bool):
                by_before.setdefault(before["prefill"] is prefill, []).append(pace)
        if not timed:
            continue
        median = statistics.median(t[0] for t in timed)
        rate = trace.get("rate_per_s")
        rate = f"{rate:.3f}" if isinstance(rate, (int, float)) else "?"
        # A label as the trace holds it, printable characters only (a hostile trace's escape
        # sequences would otherwise reach the terminal).
        label = "".join(c if c.isprintable() else "?" for c in str(trace.get("label", "?")))[:40]
        lines.append(f"{label} at {rate} req/s, {kind}: {len(timed)} steps with "
                     f"a table time, median measured/table {median:.2f}")
        groups = {}
        for pace, wall, cpu, waited, calls in timed:
            g = groups.setdefault(band_of(pace / median), [0, 0.0, 0.0, 0.0, True, True, 0, 0, True])
            g[0] += 1
            g[1] += wall
            g[2] += cpu or 0.0
            g[3] += waited or 0.0
            g[4] = g[4] and cpu is not None
            g[5] = g[5] and waited is not None
            g[6] += 1 if calls else 0
            g[7] += int(calls or 0)
            g[8] = g[8] and calls is not None
        for i in sorted(groups):
            n, wall, cpu, waited, has_cpu, has_wait, calling, calls, has_calls = groups[i]
            share = lambda part, known: f"{100 * part / wall:5.1f}%" if known and wall > 0 else "    -"
            line = (f"  pace/median {band_name(*BANDS[i]):>12}: {n:4d} steps, mean {1e3 * wall / n:7.1f} ms, "
                    f"on its CPU {share(cpu, has_cpu)}, waiting to run {share(waited, has_wait)}")
            # The caching allocator's calls to the driver, where every step of the group has them.
            if has_calls:
                line += f", the allocator called the driver in {calling} ({calls} calls)"
            lines.append(line)
        # Where the table is off for some batches (one no cell measured, say), or the loop's steps
        # cost more after a step of the other kind, these medians differ; the host's pace moves
        # them all alike.
        ratio = lambda paces: f"{statistics.median(paces):.2f} ({len(paces)})"
        batches = sorted(by_batch, key=lambda b: (isinstance(b, str), b))
        lines.append("  by batch, median measured/table (steps): "
                     + ", ".join(f"{b}: {ratio(by_batch[b])}" for b in batches))
        other = "decode" if prefill else "prefill"
        after = [f"after {name} {ratio(by_before[key])}"
                 for key, name in ((True, f"a {kind} step"), (False, f"a {other} step"), ("idle", "an idle gap"))
                 if key in by_before]
        if after:
            lines.append("  by the step before, median measured/table (steps): " + ", ".join(after))
    return lines


def main(argv):
    if len(argv) != 2:
        print("usage: served-steps.py RUN.served.jsonl", file=sys.stderr)
        return 2
    path = argv[1]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"served-steps: {path}: cannot read it: {e}", file=sys.stderr)
        return 2
    out = []
    try:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path} line {n}"
            try:
                trace = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{where}: not JSON ({e})") from None
            if not isinstance(trace, dict):
                raise ValueError(f"{where}: not a served rate's trace")
            out += table(trace, where)
    except ValueError as e:
        print(f"served-steps: {e}", file=sys.stderr)
        return 2
    if not out:
        print(f"served-steps: {path}: no step with a table time", file=sys.stderr)
        return 2
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
