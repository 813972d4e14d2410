#!/usr/bin/env python3
"""The network filter's throughput and latency, side by side in one run.

    net_bench.py PI_JAIL OUT.json [--tls-only]   (as root: it creates a network namespace)

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
runs only that (pi-jail must be a test build: PJ_TEST_BIND). Every comparison is a
ratio measured in this run. Not a test: nothing here asserts a time.
Traffic stays on loopback and in the namespace."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PI_JAIL, OUT = sys.argv[1:3]
TLS_ONLY = "--tls-only" in sys.argv[3:]
TLS_SIZE = 256 << 20
SIZE = 1 << 30
RUNS = 3
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


def jail(rule):
    return [PI_JAIL, "-q", "-w", WS, "--allow-net", rule, "--", "env", "-u", "NO_PROXY", "-u", "no_proxy"]


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


def throughput(label, host, port, socat_port, forward=True):
    url = f"http://{host}:{port}/blob"
    rule = f"{host}:{port}"
    paths = [("direct", [], url, []),
             ("forward", jail(rule), url, []) if forward else None,
             ("CONNECT", jail(rule), url, ["-p", "-x", "http://127.0.0.1:3128"]),
             ("SOCKS5", jail(rule), url, ["--socks5", "127.0.0.1:1080"]),
             ("socat relay", [], f"http://127.0.0.1:{socat_port}/blob", [])]
    got = {}
    for p in paths:
        if not p:
            continue
        name, prefix, u, opts = p
        speeds = [s for s in (curl_speed(prefix, u, opts) for _ in range(RUNS)) if s]
        got[name] = figure(f"{label}: {name}", speeds, "MB/s")
    for name in ("forward", "CONNECT", "SOCKS5", "socat relay"):
        if name in got:
            ratio(f"{label}: {name} / direct", got[name], got["direct"])
    for name in ("forward", "CONNECT", "SOCKS5"):
        if name in got:
            ratio(f"{label}: {name} / socat", got[name], got["socat relay"])


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(label, host, port, n=2000):
    rule = f"{host}:{port}"
    bulk_url = f"http://{host}:{port}/blob"
    cases = [("direct", [], "direct", []),
             ("CONNECT", jail(rule), "connect", ["-p", "-x", "http://127.0.0.1:3128"]),
             ("SOCKS5", jail(rule), "socks5", ["--socks5", "127.0.0.1:1080"])]
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
    for name in ("CONNECT", "SOCKS5"):
        for during in (False, True):
            if (name, during) in figs:
                d = figs[("direct", during)]
                w = " during bulk" if during else ""
                ratio(f"{label}: p50 {name} / direct{w}", figs[(name, during)][0], d[0])
                ratio(f"{label}: p99 {name} / direct{w}", figs[(name, during)][1], d[1])


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


def tls_section():
    """HTTPS through CONNECT: end-to-end tunnel beside a substituting connection."""
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
    port = int(open(portfile).read())
    url = f"https://127.0.0.1:{port}/blob"
    small = f"https://127.0.0.1:{port}/small"
    rule = f"127.0.0.1:{port}"
    ph, real = "sk-bench-placeholder-0123456789abcdef", "sk-bench-real-value-fedcba9876543210"
    bound = ["env", f"PJ_TEST_BIND=BENCH_KEY={ph}={real}@{rule}", PI_JAIL, "-q", "-w", WS, "--allow-net", rule,
             "--test-upstream-ca", ca, "--", "env", "-u", "NO_PROXY", "-u", "no_proxy"]
    try:
        print(f"\nHTTPS through CONNECT on loopback, {TLS_SIZE >> 20} MiB per transfer (median of 3)")
        tunnel = figure("https: end-to-end tunnel (no credential bound)",
                        [x for x in (curl_speed(jail(rule), url, ["-x", "http://127.0.0.1:3128", "--cacert", ca])
                                     for _ in range(RUNS)) if x], "MB/s")
        subst = figure("https: substituting (bound: TLS both ways, header, masking)",
                       [x for x in (curl_speed(bound, url, ["-x", "http://127.0.0.1:3128", "-H", f"x-api-key: {ph}"])
                                    for _ in range(RUNS)) if x], "MB/s")
        ratio("https: substituting / tunnel", subst, tunnel)
        print(f"\nHTTPS through CONNECT on loopback, time to the first byte of a 64-byte answer "
              f"(median of {3 * RUNS})")
        tunnel_ttfb = figure("https: first byte, end-to-end tunnel",
                             [x for x in (curl_first_byte(jail(rule), small, ["-x", "http://127.0.0.1:3128",
                                                                              "--cacert", ca])
                                          for _ in range(3 * RUNS)) if x], "s")
        subst_ttfb = figure("https: first byte, substituting",
                            [x for x in (curl_first_byte(bound, small, ["-x", "http://127.0.0.1:3128", "-H",
                                                                        f"x-api-key: {ph}"])
                                         for _ in range(3 * RUNS)) if x], "s")
        ratio("https: first byte, substituting / tunnel", subst_ttfb, tunnel_ttfb)
    finally:
        p.terminate()


print(f"network filter benchmark ({os.cpu_count()} CPUs, kernel {os.uname().release})")
if TLS_ONLY:
    tls_section()
    with open(OUT, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\nJSON: {OUT}")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0)
print("\nloopback, 1 GiB per transfer (median of 3)")
srv, port = start_server("127.0.0.1")
soc, sport = start_socat("127.0.0.1", port)
try:
    throughput("loopback", "127.0.0.1", port, sport)
    print("\nloopback, small-request round trips (2000 x 64 bytes on one connection)")
    latency("loopback", "127.0.0.1", port)
finally:
    soc.terminate()
    srv.terminate()
tls_section()

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
    print(f"\nshaped link ({shaping}), 1 GiB per transfer (median of 3)")
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

with open(OUT, "w") as f:
    json.dump(results, f, indent=2)
print(f"\nJSON: {OUT}")
shutil.rmtree(work, ignore_errors=True)
