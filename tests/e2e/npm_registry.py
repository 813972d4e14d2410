#!/usr/bin/env python3
"""A stand-in npm registry for end-to-end tests: one tiny package.

    npm_registry.py PORTFILE LOG

Serves GET /pj-tiny (the packument: metadata of version 1.0.0, its
tarball's sha1 and sha512 integrity) and GET /pj-tiny/-/pj-tiny-1.0.0.tgz
(the tarball: package/package.json and package/index.js, which prints
"pj-tiny works"). Any other path is 404. Each request's path is appended
to LOG, so a test can tell a cached install from a fetched one. Listens on
127.0.0.1 on a free port, written to PORTFILE; stops after 300 s or on
SIGTERM."""
import base64
import hashlib
import io
import json
import os
import signal
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, log_path = sys.argv[1], sys.argv[2]


def tarball():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in (("package/package.json", json.dumps({"name": "pj-tiny", "version": "1.0.0",
                                                                "main": "index.js"})),
                           ("package/index.js", "console.log('pj-tiny works');\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


TGZ = tarball()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with open(log_path, "a") as log:
            log.write(self.path + "\n")
        base = "http://127.0.0.1:%d" % self.server.server_address[1]
        if self.path.split("?")[0] == "/pj-tiny":
            version = {"name": "pj-tiny", "version": "1.0.0", "main": "index.js",
                       "dist": {"tarball": base + "/pj-tiny/-/pj-tiny-1.0.0.tgz",
                                "shasum": hashlib.sha1(TGZ).hexdigest(),
                                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(TGZ).digest()).decode()}}
            body = json.dumps({"name": "pj-tiny", "dist-tags": {"latest": "1.0.0"},
                               "versions": {"1.0.0": version}}).encode()
            self.send(200, body, "application/json")
        elif self.path == "/pj-tiny/-/pj-tiny-1.0.0.tgz":
            self.send(200, TGZ, "application/octet-stream")
        else:
            self.send(404, b'{"error": "not found"}', "application/json")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
guard = threading.Timer(300, server.shutdown)
guard.daemon = True
guard.start()
server.serve_forever()
