#!/usr/bin/env python3
"""The network filter's throughput and latency, side by side in one run.

    net_bench.py PI_JAIL OUT.json [--tls-only | --memory-only | --loopback-only] [--against OLD_PI_JAIL]
    (as root: it creates a network namespace)

Paths compared, with the same client (curl) and server (sendfile from a
sparse file): direct (no jail), the jail's loopback forward, CONNECT
through the HTTP proxy, SOCKS5, and a plain `socat` relay on the host.
First on loopback (1 GiB), then over a shaped link: a veth pair into a
network namespace this script creates, 1 Gbit/s each way and a few ms of
delay with `tc netem` (when the kernel has no sch_netem: `tbf` at 1 Gbit/s
and no added delay; the output says which). Then the round-trip time of
small requests (64 bytes each way on one connection), alone and while a
bulk transfer runs on the same path, as p50/p99. Then HTTPS through
CONNECT on loopback: an end-to-end tunnel (a host no credential is bound
to) beside a substituting connection (a bound host: the filter terminates
TLS, substitutes the header, masks the body): the throughput of a bulk
download and the time to the first byte of a small answer; --tls-only
runs only that (pi-jail must be a test build: PJ_TEST_BIND). Then the
start-up of a jail with the filter, and the peak resident memory of the
supervisor and its filter together while they relay (plain, and
substituting over TLS; --memory-only runs only that). --loopback-only
leaves out the shaped link.

--against OLD_PI_JAIL measures every jailed path, the start-up and the
memory with both binaries, run after run in turn (a drift in the
machine's load falls on both alike), and adds the ratio of each figure to
the old binary's ("[before]"): a change set beside the main it comes from.
Every comparison is a ratio measured in this run. Not a test: nothing here
asserts a time. Traffic stays on loopback and in the namespace."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PI_JAIL, OUT = sys.argv[1:3]
OPTIONS = sys.argv[3:]
TLS_ONLY = "--tls-only" in OPTIONS
MEMORY_ONLY = "--memory-only" in OPTIONS
LOOPBACK_ONLY = "--loopback-only" in OPTIONS
AGAINST = OPTIONS[OPTIONS.index("--against") + 1] if "--against" in OPTIONS else None
# The binaries measured, each with the tag its figures carry.
BEFORE = " [before]"
JAILS = [("", PI_JAIL)] + ([(BEFORE, AGAINST)] if AGAINST else [])
TLS_SIZE = 256 << 20
SIZE = 1 << 30
RUNS = 4  # even: as many rounds in each order (round_robin)
work = tempfile.mkdtemp(prefix="pj-netbench.")
os.chmod(work, 0o755)
WS = os.path.join(work, "ws")
HOME = os.path.join(work, "home")
os.makedirs(WS)
os.makedirs(HOME)
ENV = dict(os.environ, HOME=HOME)
results = {"figures": [], "ratios": [], "shaping": None}

# The server: GET /blob sends SIZE bytes with sendfile(2); "ECHO\n" echoes.
SERVER = r'''
import os, socket, sys, threading
host, portfile, blob = sys.argv[1:4]
size = os.path.getsize(blob)
def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = b""
    while b"\n" not in head:
        b = c.recv(4096)
        if not b:
            return c.close()
        head += b
    if head.startswith(b"ECHO\n"):
        rest = head[5:]
        if rest:
            c.sendall(rest)
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        return c.close()
    while b"\r\n\r\n" not in head:
        b = c.recv(4096)
        if not b:
            return c.close()
        head += b
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
    try:
        with open(blob, "rb") as f:
            c.sendfile(f)
    except OSError:
        pass  # the client went away (a bulk transfer cut short on purpose)
    c.close()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, 0))
s.listen(128)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''

# The latency client: N round trips of 64 bytes on one connection, direct
# or through the proxy (CONNECT) or SOCKS5; prints the times in seconds.
LATENCY = r'''
import json, socket, struct, sys, time
mode, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if mode == "connect":
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (host.encode(), port))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
elif mode == "socks5":
    s = socket.create_connection(("127.0.0.1", 1080))
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(host) + struct.pack(">H", port))
    s.recv(10)
else:
    s = socket.create_connection((host, port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"ECHO\n")
msg = b"x" * 64
times = []
for _ in range(n):
    t = time.perf_counter()
    s.sendall(msg)
    got = 0
    while got < 64:
        got += len(s.recv(64 - got))
    times.append(time.perf_counter() - t)
print(json.dumps(times))
'''
with open(os.path.join(WS, "latency.py"), "w") as f:
    f.write(LATENCY)
server_py = os.path.join(work, "server.py")
with open(server_py, "w") as f:
    f.write(SERVER)
blob = os.path.join(work, "blob")
with open(blob, "wb") as f:
    f.truncate(SIZE)  # sparse: reads cost no disk


def start_server(host, netns=None):
    portfile = os.path.join(work, f"port-{host}")
    cmd = ["python3", server_py, host, portfile, blob]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    p = subprocess.Popen(cmd)
    for _ in range(200):
        if os.path.exists(portfile):
            return p, int(open(portfile).read())
        time.sleep(0.05)
    raise SystemExit("the bench server did not start")


def start_socat(host, port):
    s = subprocess.Popen(["socat", "TCP-LISTEN:0,bind=127.0.0.1,reuseaddr,fork", f"TCP:{host}:{port}"],
                         stderr=subprocess.DEVNULL)
    # socat does not say which port it took: find it through ss.
    for _ in range(100):
        out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if f"pid={s.pid}," in line:
                return s, int(line.split()[3].rsplit(":", 1)[1])
        time.sleep(0.05)
    raise SystemExit("socat did not start")


def fmt(v, unit):
    if unit == "MB/s":
        return f"{v:.0f} MB/s ({v * 8 / 1000:.2f} Gbit/s)"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    return f"{v * 1000:.3f} ms"


def figure(name, samples, unit):
    entry = {"name": name, "unit": unit, "median": statistics.median(samples) if samples else None,
             "samples": samples}
    results["figures"].append(entry)
    shown = "unavailable" if not samples else fmt(entry["median"], unit)
    print(f"  {name:62} {shown}")
    return entry


def ratio(what, a, b):
    if not a or not b or a["median"] is None or b["median"] is None:
        return
    r = a["median"] / b["median"]
    results["ratios"].append({"what": what, "ratio": r})
    print(f"  {'ratio: ' + what:62} {r:.2f}x")


def jail(rule, binary=PI_JAIL):
    return [binary, "-q", "-w", WS, "--allow-net", rule, "--", "env", "-u", "NO_PROXY", "-u", "no_proxy"]


def curl_write_out(prefix, url, opts, what):
    r = subprocess.run(prefix + ["curl", "-s", "-o", "/dev/null", "-w", what, *opts, url],
                       env=ENV, cwd=WS, capture_output=True, text=True)
    return float(r.stdout) if r.returncode == 0 and r.stdout else None


def curl_speed(prefix, url, opts):
    speed = curl_write_out(prefix, url, opts, "%{speed_download}")
    return speed / 1e6 if speed else None


def curl_first_byte(prefix, url, opts):
    """Seconds from curl's start to the first byte of the answer: the
    CONNECT, both TLS handshakes (one when tunnelled) and the request."""
    return curl_write_out(prefix, url, opts, "%{time_starttransfer}")


def round_robin(paths, measure, runs):
    """Each of `paths` ((name, ...), ...) measured by `measure` in turn, run
    after run: a drift in the machine's load falls on all of them alike.
    Every other round goes in the reverse order, so that no path always
    follows the same one (the first tunnel of a round measured 10-17%
    below the same binary's second). The samples of each by name (failed
    runs left out)."""
    samples = {p[0]: [] for p in paths}
    for i in range(runs):
        for p in paths if i % 2 == 0 else reversed(paths):
            v = measure(*p[1:])
            if v:
                samples[p[0]].append(v)
    return samples


def against_ratios(label, got, names):
    """With --against: each figure of `names` beside its [before] twin."""
    for name in names if AGAINST else ():
        if name in got and name + BEFORE in got:
            ratio(f"{label}: {name} / {name}{BEFORE}", got[name], got[name + BEFORE])


def throughput(label, host, port, socat_port, forward=True):
    url = f"http://{host}:{port}/blob"
    rule = f"{host}:{port}"
    paths = [("direct", [], url, [])]
    for tag, binary in JAILS:
        if forward:
            paths.append((f"forward{tag}", jail(rule, binary), url, []))
        paths.append((f"CONNECT{tag}", jail(rule, binary), url, ["-p", "-x", "http://127.0.0.1:3128"]))
        paths.append((f"SOCKS5{tag}", jail(rule, binary), url, ["--socks5", "127.0.0.1:1080"]))
    paths.append(("socat relay", [], f"http://127.0.0.1:{socat_port}/blob", []))
    samples = round_robin(paths, curl_speed, RUNS)
    got = {name: figure(f"{label}: {name}", samples[name], "MB/s") for name, *_ in paths}
    kinds = ["forward", "CONNECT", "SOCKS5"] if forward else ["CONNECT", "SOCKS5"]
    for name, *_ in paths[1:]:
        ratio(f"{label}: {name} / direct", got[name], got["direct"])
    for tag, _ in JAILS:
        for kind in kinds:
            ratio(f"{label}: {kind}{tag} / socat", got[kind + tag], got["socat relay"])
    against_ratios(label, got, kinds)


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(label, host, port, n=2000):
    rule = f"{host}:{port}"
    bulk_url = f"http://{host}:{port}/blob"
    cases = [("direct", [], "direct", [])]
    for tag, binary in JAILS:
        cases.append((f"CONNECT{tag}", jail(rule, binary), "connect", ["-p", "-x", "http://127.0.0.1:3128"]))
        cases.append((f"SOCKS5{tag}", jail(rule, binary), "socks5", ["--socks5", "127.0.0.1:1080"]))
    figs = {}
    for name, prefix, mode, opts in cases:
        for during in (False, True):
            lat = f"python3 latency.py {mode} {host} {port} {n}"
            if during:
                # A bulk transfer on the same path for the whole measurement.
                bulk = " ".join(["curl -s"] + opts + [f"-o /dev/null {bulk_url}"] * 20)
                script = f"{bulk} & b=$!; sleep 0.3; {lat}; kill $b"
            else:
                script = lat
            times = []
            for attempt in range(3):
                r = subprocess.run(prefix + ["sh", "-c", script], env=ENV, cwd=WS, capture_output=True, text=True)
                try:
                    times = json.loads(r.stdout.strip().splitlines()[-1])
                    break
                except (IndexError, ValueError):
                    print(f"  ({name}: attempt {attempt + 1} measured nothing: exit {r.returncode} "
                          f"{r.stderr.strip()[-300:]} stdout {r.stdout[:200]!r})", file=sys.stderr)
            tag = f"{label}: small requests, {name}" + (", during a bulk transfer" if during else "")
            p50 = figure(tag + " p50", [percentile(times, 0.5)] if times else [], "s")
            p99 = figure(tag + " p99", [percentile(times, 0.99)] if times else [], "s")
            figs[(name, during)] = (p50, p99)
    for name, *_ in cases[1:]:
        for during in (False, True):
            d = figs[("direct", during)]
            w = " during bulk" if during else ""
            ratio(f"{label}: p50 {name} / direct{w}", figs[(name, during)][0], d[0])
            ratio(f"{label}: p99 {name} / direct{w}", figs[(name, during)][1], d[1])
            if not name.endswith(BEFORE) and AGAINST:
                ratio(f"{label}: p99 {name} / {name}{BEFORE}{w}", figs[(name, during)][1],
                      figs[(name + BEFORE, during)][1])


# HTTPS: answers GET /small with 64 bytes, any other request with TLS_SIZE
# zero bytes (Content-Length).
TLS_SERVER = r'''
import os, socket, ssl, sys, threading
cert, key, portfile, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
chunk = bytes(1 << 20)
def serve(raw):
    try:
        c = ctx.wrap_socket(raw, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(4096)
            if not b:
                return
            head += b
        left = 64 if head.startswith(b"GET /small ") else size
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % left)
        while left:
            n = min(left, len(chunk))
            c.sendall(chunk[:n])
            left -= n
        c.close()
    except OSError:
        pass
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(64)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def start_tls_server():
    """The HTTPS server, its certificate signed by a CA made for this run.
    Its process, its port and the CA's file (in the workspace)."""
    ca, key = os.path.join(WS, "bench-ca.pem"), os.path.join(work, "bench-ca.key")
    cert, ckey = os.path.join(work, "server.pem"), os.path.join(work, "server.key")
    subprocess.run(f"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bench-ca -days 1 "
                   f"-keyout {key} -out {ca} -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign "
                   f"&& openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout {ckey} "
                   f"-out {cert}.csr && printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > {cert}.ext "
                   f"&& openssl x509 -req -in {cert}.csr -CA {ca} -CAkey {key} -CAcreateserial -days 1 -out {cert} "
                   f"-extfile {cert}.ext", shell=True, check=True, capture_output=True)
    os.chmod(ca, 0o644)
    script = os.path.join(work, "tls_server.py")
    with open(script, "w") as f:
        f.write(TLS_SERVER)
    portfile = os.path.join(work, "port-tls")
    p = subprocess.Popen(["python3", script, cert, ckey, portfile, str(TLS_SIZE)])
    for _ in range(200):
        if os.path.exists(portfile):
            break
        time.sleep(0.05)
    return p, int(open(portfile).read()), ca


PLACEHOLDER, REAL = "sk-bench-placeholder-0123456789abcdef", "sk-bench-real-value-fedcba9876543210"


def bound_jail(rule, ca, binary=PI_JAIL):
    """A jail where a credential is bound to `rule`: the filter terminates
    TLS (trusting `ca` upstream), substitutes the header, masks the body."""
    return ["env", f"PJ_TEST_BIND=BENCH_KEY={PLACEHOLDER}={REAL}@{rule}", binary, "-q", "-w", WS, "--allow-net", rule,
            "--test-upstream-ca", ca, "--", "env", "-u", "NO_PROXY", "-u", "no_proxy"]


def tls_section(tls):
    """HTTPS through CONNECT: end-to-end tunnel beside a substituting connection."""
    _, port, ca = tls
    url = f"https://127.0.0.1:{port}/blob"
    small = f"https://127.0.0.1:{port}/small"
    rule = f"127.0.0.1:{port}"
    # The tunnel's client trusts the system's CAs and the bench CA, as the
    # substituting one trusts the jail's bundle (the system's CAs and the
    # run's): curl parses the whole bundle for each connection (about 30 ms
    # for Debian's 140), which a CA file of one certificate would leave out
    # of the tunnel's first byte only.
    bundle = os.path.join(WS, "bench-bundle.pem")
    with open(bundle, "w") as out:
        out.write(open("/etc/ssl/certs/ca-certificates.crt").read() + open(ca).read())
    os.chmod(bundle, 0o644)
    tunnel_opts = ["-x", "http://127.0.0.1:3128", "--cacert", bundle]
    bound_opts = ["-x", "http://127.0.0.1:3128", "-H", f"x-api-key: {PLACEHOLDER}"]
    print(f"\nHTTPS through CONNECT on loopback, {TLS_SIZE >> 20} MiB per transfer (median of {RUNS})")
    paths = []
    for tag, binary in JAILS:
        paths.append((f"tunnel{tag}", jail(rule, binary), url, tunnel_opts))
        paths.append((f"substituting{tag}", bound_jail(rule, ca, binary), url, bound_opts))
    samples = round_robin(paths, curl_speed, RUNS)
    got = {}
    for tag, _ in JAILS:
        got["tunnel" + tag] = figure(f"https: end-to-end tunnel (no credential bound){tag}", samples["tunnel" + tag],
                                     "MB/s")
        got["substituting" + tag] = figure(f"https: substituting (bound: TLS both ways, header, masking){tag}",
                                           samples["substituting" + tag], "MB/s")
        ratio(f"https: substituting / tunnel{tag}", got["substituting" + tag], got["tunnel" + tag])
    against_ratios("https", got, ["tunnel", "substituting"])
    print(f"\nHTTPS through CONNECT on loopback, time to the first byte of a 64-byte answer "
          f"(median of {3 * RUNS})")
    paths = []
    for tag, binary in JAILS:
        paths.append((f"first byte, tunnel{tag}", jail(rule, binary), small, tunnel_opts))
        paths.append((f"first byte, substituting{tag}", bound_jail(rule, ca, binary), small, bound_opts))
    samples = round_robin(paths, curl_first_byte, 3 * RUNS)
    got = {name: figure(f"https: {name}", samples[name], "s") for name, *_ in paths}
    for tag, _ in JAILS:
        ratio(f"https: first byte, substituting / tunnel{tag}", got["first byte, substituting" + tag],
              got["first byte, tunnel" + tag])
    against_ratios("https", got, ["first byte, tunnel", "first byte, substituting"])


def startup(rule):
    """Seconds from the start of `pi-jail ... -- true` (with the filter) to
    its end, interleaved between the binaries."""
    def run_true(prefix):
        t = time.perf_counter()
        r = subprocess.run(prefix + ["true"], env=ENV, cwd=WS, capture_output=True)
        return time.perf_counter() - t if r.returncode == 0 else None
    print("\nstart-up: `true` in a jail with a network rule (median of 20)")
    paths = [(f"start-up{tag}", jail(rule, binary)) for tag, binary in JAILS]
    for p in paths:
        run_true(p[1])  # warm-up
    samples = round_robin(paths, run_true, 20)
    got = {name: figure(name, samples[name], "s") for name, _ in paths}
    against_ratios("start-up", got, ["start-up"])


def status_kib(pid, field):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def filter_of(supervisor):
    """The run's network filter: the supervisor's child running
    pi-jail-filter, or None."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == supervisor and cmd.startswith(b"pi-jail-filter"):
            return int(d)
    return None


def peak_memory(prefix, command):
    """The peak of the supervisor's and the filter's resident memory
    together (sampled every 10 ms) while `command` runs in the jail (once
    it started: the start-up's peak is not the relay's), and each one's
    own peak (VmHWM, start-up included), in MiB."""
    started = os.path.join(WS, "started")
    if os.path.exists(started):
        os.unlink(started)
    proc = subprocess.Popen(prefix + ["sh", "-c", "touch started; " + command], env=ENV, cwd=WS,
                            stdout=subprocess.DEVNULL)
    together = hwm_sup = hwm_filter = 0
    filt = None
    while proc.poll() is None:
        filt = filt or filter_of(proc.pid)
        if filt and os.path.exists(started):
            together = max(together, status_kib(proc.pid, "VmRSS") + status_kib(filt, "VmRSS"))
        hwm_sup = max(hwm_sup, status_kib(proc.pid, "VmHWM"))
        if filt:
            hwm_filter = max(hwm_filter, status_kib(filt, "VmHWM"))
        time.sleep(0.01)
    return together / 1024, hwm_sup / 1024, hwm_filter / 1024


def memory(plain_port, tls):
    _, tls_port, ca = tls
    print(f"\npeak resident memory, supervisor + filter, while relaying (median of {RUNS})")
    plain_rule, tls_rule = f"127.0.0.1:{plain_port}", f"127.0.0.1:{tls_port}"
    got = {}
    for what, make, command in (
            ("relaying 1 GiB (forward)", lambda b: jail(plain_rule, b),
             f"curl -s -o /dev/null http://{plain_rule}/blob"),
            (f"substituting {TLS_SIZE >> 20} MiB over TLS", lambda b: bound_jail(tls_rule, ca, b),
             f"curl -s -o /dev/null -x http://127.0.0.1:3128 -H 'x-api-key: {PLACEHOLDER}' https://{tls_rule}/blob")):
        paths = [(tag, make(binary)) for tag, binary in JAILS]
        samples = round_robin(paths, lambda prefix: peak_memory(prefix, command), RUNS)
        for tag, _ in JAILS:
            runs = samples[tag]
            got[what + tag] = figure(f"memory, {what}{tag}: together while relaying", [r[0] for r in runs], "MiB")
            figure(f"memory, {what}{tag}: supervisor VmHWM", [r[1] for r in runs], "MiB")
            figure(f"memory, {what}{tag}: filter VmHWM", [r[2] for r in runs], "MiB")
        against_ratios("memory", got, [what])


print(f"network filter benchmark ({os.cpu_count()} CPUs, kernel {os.uname().release})")
if AGAINST:
    print(f"this binary: {PI_JAIL}\n[before]:    {AGAINST}")


def finish():
    with open(OUT, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nJSON: {OUT}")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0)


tls = start_tls_server()
try:
    if TLS_ONLY:
        tls_section(tls)
        finish()
    if MEMORY_ONLY:
        srv, port = start_server("127.0.0.1")
        try:
            memory(port, tls)
        finally:
            srv.terminate()
        finish()
    print(f"\nloopback, 1 GiB per transfer (median of {RUNS})")
    srv, port = start_server("127.0.0.1")
    soc, sport = start_socat("127.0.0.1", port)
    try:
        throughput("loopback", "127.0.0.1", port, sport)
        print("\nloopback, small-request round trips (2000 x 64 bytes on one connection)")
        latency("loopback", "127.0.0.1", port)
        tls_section(tls)
        startup(f"127.0.0.1:{port}")
        memory(port, tls)
    finally:
        soc.terminate()
        srv.terminate()
finally:
    tls[0].terminate()
if LOOPBACK_ONLY:
    finish()

ns = f"pjbench{os.getpid()}"
host_if, ns_if = f"pjbh{os.getpid() % 10000}", f"pjbn{os.getpid() % 10000}"
try:
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns], check=True)
    subprocess.run(["ip", "addr", "add", "10.203.0.1/24", "dev", host_if], check=True)
    subprocess.run(["ip", "link", "set", host_if, "up"], check=True)
    subprocess.run(["ip", "-n", ns, "addr", "add", "10.203.0.2/24", "dev", ns_if], check=True)
    subprocess.run(["ip", "-n", ns, "link", "set", ns_if, "up"], check=True)
    subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
    shaping = None
    for qdisc, desc in ((["netem", "rate", "1gbit", "delay", "2ms", "limit", "100000"], "netem 1 Gbit/s, 2 ms each way"),
                        (["tbf", "rate", "1gbit", "burst", "256kb", "latency", "20ms"],
                         "tbf 1 Gbit/s, no added delay (this kernel has no sch_netem)")):
        a = subprocess.run(["tc", "qdisc", "add", "dev", host_if, "root"] + qdisc, capture_output=True)
        b = subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", ns_if, "root"] + qdisc, capture_output=True)
        if a.returncode == 0 and b.returncode == 0:
            shaping = desc
            break
        subprocess.run(["tc", "qdisc", "del", "dev", host_if, "root"], capture_output=True)
    results["shaping"] = shaping
    print(f"\nshaped link ({shaping}), 1 GiB per transfer (median of {RUNS})")
    srv, port = start_server("10.203.0.2", ns)
    soc, sport = start_socat("10.203.0.2", port)
    try:
        throughput("shaped", "10.203.0.2", port, sport, forward=False)
        print("  (no forward: forwards exist for host-loopback services only)")
        print("\nshaped link, small-request round trips")
        latency("shaped", "10.203.0.2", port, n=500)
    finally:
        soc.terminate()
        srv.terminate()
finally:
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)

finish()
