#!/usr/bin/env python3
"""Many jails at once on one machine, side by side with bubblewrap.

    fleet_bench.py PI_JAIL OUT.json [SIZES]      SIZES: default 1,10,50

For N jails started at the same moment, in one workspace and one $HOME
(the CI fan-out case):
  - start-up: the wall time until all N have run /bin/true, divided by N
    (the cost per jail when N share the machine), and the median time one
    run took;
  - memory: with N jails alive at once (each waits until all have
    started), the supervisor's peak resident memory (VmHWM of the process
    started: pi-jail's supervisor, bwrap's parent) and the memory of all
    the tool's own processes per jail (the supervisor plus the jail's init:
    every process in the tree whose command is the tool's), as PSS, so
    pages they share with each other and with the other jails (the
    binary, libraries) are counted in shares, not once per process.
Each figure is the median over rounds (min and max shown), each
comparison a ratio measured in this same run. bwrap is measured when it
is installed (tests/bench/run installs it). Not a test: nothing asserts a
time. Nothing here uses the network."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PI_JAIL, OUT = sys.argv[1:3]
SIZES = [int(n) for n in (sys.argv[3] if len(sys.argv) > 3 else "1,10,50").split(",")]
ROUNDS = {1: 20, 10: 5}  # larger N: 3 rounds

work = tempfile.mkdtemp(prefix="pj-fleet-bench.")
os.chmod(work, 0o755)
WS = os.path.join(work, "ws")
HOME = os.path.join(work, "home")
os.makedirs(WS)
os.makedirs(os.path.join(HOME, ".pi", "agent"))
ENV = dict(os.environ, HOME=HOME, PATH="/usr/local/bin:/usr/bin:/bin")
results = {"machine": {"cpus": os.cpu_count(), "user": "root" if os.getuid() == 0 else str(os.getuid())},
           "figures": [], "ratios": []}

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
         "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc/passwd", "/etc/passwd", "--ro-bind",
         "/etc/ld.so.cache", "/etc/ld.so.cache", "--tmpfs", "/tmp", "--bind", WS, WS, "--proc", "/proc",
         "--dev", "/dev", "--chdir", WS, "--"]
TOOLS = {"pi-jail": ([PI_JAIL, "-q", "-w", WS, "--"], "pi-jail")}
if shutil.which("bwrap"):
    TOOLS["bwrap"] = (BWRAP, "bwrap")
else:
    print("bwrap is not installed: pi-jail alone (tests/bench/run installs bubblewrap)", file=sys.stderr)


def fmt(v, unit):
    if unit == "s":
        return f"{v * 1000:.1f} ms" if v < 10 else f"{v:.2f} s"
    return f"{v:.1f} {unit}"


def figure(name, samples, unit):
    entry = {"name": name, "unit": unit, "median": None, "min": None, "max": None, "runs": 0}
    if samples:
        entry.update(median=statistics.median(samples), min=min(samples), max=max(samples), runs=len(samples))
    results["figures"].append(entry)
    shown = "unavailable" if entry["median"] is None else \
        f"{fmt(entry['median'], unit)}  (min {fmt(entry['min'], unit)}, max {fmt(entry['max'], unit)})"
    print(f"  {name:62} {shown}")
    return entry


def ratio(what, a, b):
    if not a or not b or a["median"] is None or not b["median"]:
        return
    r = a["median"] / b["median"]
    results["ratios"].append({"what": what, "ratio": r})
    print(f"  {'ratio: ' + what:62} {r:.2f}x")


def start_all(prefix, n, command):
    """Start n runs of prefix + command(i) at once; [(Popen, start time)]."""
    procs = []
    for i in range(n):
        procs.append((subprocess.Popen(prefix + command(i), env=ENV, cwd=WS, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), time.perf_counter()))
    return procs


def startup(prefix, n):
    """One round: (wall time for all n / n, median time of one run), or None when a run failed."""
    t0 = time.perf_counter()
    procs = start_all(prefix, n, lambda i: ["/bin/true"])
    ends = []
    failed = None
    # Reaped in the order they end: each run's own time is its end minus its start.
    pending = {p.pid: (p, t) for p, t in procs}
    while pending:
        pid, status = os.wait()
        if pid not in pending:
            continue
        p, t = pending.pop(pid)
        ends.append(time.perf_counter() - t)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0 and failed is None:
            failed = (p.returncode, p.stderr.read().decode(errors="replace")[-400:])
    wall = time.perf_counter() - t0
    for p, _ in procs:
        p.stderr.close()
    if failed:
        print(f"    a run failed (exit {failed[0]}): {failed[1]}", file=sys.stderr)
        return None
    return wall / n, statistics.median(ends)


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def pss_kib(pid):
    """Proportional set size: pages shared with other processes (a forked
    jail init shares most of its supervisor's) counted once, in shares."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_kib(pid, name):
    """PSS of the processes below and including pid whose command is `name`."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        if comm(p) == name:
            total += pss_kib(p)
        todo += children(p)
    return total


def memory(prefix, name, n):
    """One round: ([supervisor VmHWM MiB], [tool's processes' PSS MiB]) per jail, or None."""
    started = os.path.join(WS, "started")
    go = os.path.join(WS, "go")
    shutil.rmtree(started, ignore_errors=True)
    os.makedirs(started)
    if os.path.exists(go):
        os.unlink(go)
    procs = start_all(prefix, n, lambda i: ["/bin/sh", "-c", f": > {started}/{i}; "
                                            f"while [ ! -e {go} ]; do sleep 0.02; done"])
    deadline = time.monotonic() + 120  # a guard against a hung start, not a measurement
    while len(os.listdir(started)) < n and time.monotonic() < deadline and all(p.poll() is None for p, _ in procs):
        time.sleep(0.02)
    ok = len(os.listdir(started)) == n
    hwm = [status_kib(p.pid, "VmHWM") for p, _ in procs] if ok else []
    rss = [tree_pss_kib(p.pid, name) for p, _ in procs] if ok else []
    open(go, "w").close()
    for p, _ in procs:
        p.wait()
        p.stderr.close()
    if not ok or None in hwm:
        print(f"    {name}: not all {n} jails started", file=sys.stderr)
        return None
    return [h / 1024 for h in hwm], [r / 1024 for r in rss]


print(f"machine: {results['machine']}")
for n in SIZES:
    print(f"\n{n} jail{'s' if n > 1 else ''} started at once (one workspace, one $HOME)")
    rounds = ROUNDS.get(n, 3)
    per = {}
    for tool, (prefix, name) in TOOLS.items():
        startup(prefix, n)  # warm-up
        samples = [startup(prefix, n) for _ in range(rounds)]
        samples = [s for s in samples if s]
        per[tool] = {
            "amortised": figure(f"{tool}: start-up per jail (wall time / {n})", [s[0] for s in samples], "s"),
            "one": figure(f"{tool}: one run's own time (median of the {n})", [s[1] for s in samples], "s"),
        }
        hwm, rss = [], []
        for _ in range(max(1, rounds // 2)):
            m = memory(prefix, name, n)
            if m:
                hwm += m[0]
                rss += m[1]
        per[tool]["hwm"] = figure(f"{tool}: supervisor peak resident memory per jail (VmHWM)", hwm, "MiB")
        per[tool]["rss"] = figure(f"{tool}: memory of its own processes per jail (PSS)", rss, "MiB")
    if "bwrap" in per:
        a, b = per["pi-jail"], per["bwrap"]
        ratio(f"start-up per jail, N={n}: pi-jail / bwrap", a["amortised"], b["amortised"])
        ratio(f"one run's time, N={n}: pi-jail / bwrap", a["one"], b["one"])
        ratio(f"supervisor peak RSS, N={n}: pi-jail / bwrap", a["hwm"], b["hwm"])
        ratio(f"own processes' PSS per jail, N={n}: pi-jail / bwrap", a["rss"], b["rss"])
    if n != SIZES[0]:
        first = next(f for f in results["figures"] if f["name"] == f"pi-jail: start-up per jail (wall time / {SIZES[0]})")
        ratio(f"pi-jail start-up per jail: N={n} / N={SIZES[0]}", per["pi-jail"]["amortised"], first)

runs_dir = os.path.join(HOME, ".local", "state", "pi-jail", "runs")
left = os.listdir(runs_dir) if os.path.isdir(runs_dir) else []
print(f"\nleft in pi-jail's runs/: {len(left)}")
with open(OUT, "w") as f:
    json.dump(results, f, indent=2)
print(f"JSON: {OUT}")
shutil.rmtree(work, ignore_errors=True)
