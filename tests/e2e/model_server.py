#!/usr/bin/env python3
"""A scripted OpenAI-compatible model server for end-to-end tests.

    model_server.py SCRIPT.json LOG.jsonl PORTFILE

SCRIPT.json is a list of steps, or an object of lists keyed by model id
(so that a child Pi session can follow a script of its own); each step is
{"tool": NAME, "args": {...}} (a tool call) or {"text": "..."}. Pi sends the whole conversation with every
request: the server picks step N by counting the assistant messages
already in it, and answers a final text when the script is done. Each
request's tool results (role "tool"), user messages and system prompt
(the first "system" or "developer" message, null when there is none) are
appended to LOG.jsonl for the test to read. The script is read for every request. The chosen port is written to PORTFILE. Listens on
127.0.0.1 only; stops after 300 s or on SIGTERM. With PJ_MODEL_TLS_CERT and
PJ_MODEL_TLS_KEY (PEM files) it speaks HTTPS; each log line also holds the
request's Authorization header ("auth")."""
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

script_path = sys.argv[1]
log_path = sys.argv[2]
lock = threading.Lock()


def chunk(delta, finish=None):
    body = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return ("data: " + json.dumps(body) + "\n\n").encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        messages = request.get("messages", [])
        step_index = sum(1 for m in messages if m.get("role") == "assistant")
        script = json.load(open(script_path))  # re-read: tests may rewrite it
        steps = script.get(request.get("model"), []) if isinstance(script, dict) else script
        with lock:
            with open(log_path, "a") as log:
                log.write(json.dumps({"model": request.get("model"), "step": step_index,
                                      "auth": self.headers.get("Authorization"),
                                      "tool_results": [m.get("content") for m in messages if m.get("role") == "tool"],
                                      "user": [m.get("content") for m in messages if m.get("role") == "user"],
                                      "system": next((m.get("content") for m in messages
                                                      if m.get("role") in ("system", "developer")), None)}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        if step_index < len(steps):
            step = steps[step_index]
        else:
            step = {"text": "done"}
        if "tool" in step:
            call = {"index": 0, "id": f"call_{step_index}", "type": "function",
                    "function": {"name": step["tool"], "arguments": json.dumps(step.get("args", {}))}}
            self.wfile.write(chunk({"role": "assistant", "tool_calls": [call]}))
            self.wfile.write(chunk({}, "tool_calls"))
        else:
            self.wfile.write(chunk({"role": "assistant", "content": step["text"]}))
            self.wfile.write(chunk({}, "stop"))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if os.environ.get("PJ_MODEL_TLS_CERT"):
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.environ["PJ_MODEL_TLS_CERT"], os.environ["PJ_MODEL_TLS_KEY"])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(sys.argv[3], "w") as f:
        f.write(str(server.server_address[1]))
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown, daemon=True).start())
    timer = threading.Timer(300, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()
    os._exit(0)


if __name__ == "__main__":
    main()
