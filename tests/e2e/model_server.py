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
request's Authorization header ("auth").

It also stands in for chatgpt.com's Codex backend (Pi's openai-codex
provider, which talks WebSocket by default): a WebSocket upgrade of GET
.../codex/responses is accepted and logged ({"transport": "websocket", ...},
with the upgrade's Authorization and Sec-WebSocket-Extensions), and each
response.create message is answered with the Responses events of a text
step, "$TOKEN" in the text replaced by the bearer token the upgrade
carried (an echo, as a hostile server would send it), that event split
across two frames inside the token. A POST there (Pi's SSE fallback) is
logged as {"transport": "sse"} and refused: the test sees which was used."""
import base64
import hashlib
import json
import os
import signal
import struct
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
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.codex_websocket()
        body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if self.path.endswith("/codex/responses"):
            self.rfile.read(length)
            log_line({"transport": "sse", "path": self.path, "auth": self.headers.get("Authorization")})
            self.send_error(404, "this stand-in answers the Codex backend over WebSocket only")
            return
        request = json.loads(self.rfile.read(length) or b"{}")
        messages = request.get("messages", [])
        step_index = sum(1 for m in messages if m.get("role") == "assistant")
        script = json.load(open(script_path))  # re-read: tests may rewrite it
        steps = script.get(request.get("model"), []) if isinstance(script, dict) else script
        log_line({"model": request.get("model"), "step": step_index, "auth": self.headers.get("Authorization"),
                  "tool_results": [m.get("content") for m in messages if m.get("role") == "tool"],
                  "user": [m.get("content") for m in messages if m.get("role") == "user"],
                  "system": next((m.get("content") for m in messages if m.get("role") in ("system", "developer")),
                                 None)})
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

    def codex_websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        auth = self.headers.get("Authorization") or ""
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        log_line({"transport": "websocket", "path": self.path, "auth": auth,
                  "extensions": self.headers.get("Sec-WebSocket-Extensions")})
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        while True:
            message = read_ws_message(self.rfile, self.wfile)
            if message is None:
                return
            request = json.loads(message)
            if request.get("type") != "response.create":
                continue
            items = request.get("input", [])
            step_index = sum(1 for i in items if i.get("role") == "assistant")
            script = json.load(open(script_path))
            steps = script.get(request.get("model"), []) if isinstance(script, dict) else script
            step = steps[step_index] if step_index < len(steps) else {"text": "done"}
            log_line({"model": request.get("model"), "step": step_index, "transport": "websocket", "auth": auth})
            self.codex_answer(step.get("text", "done").replace("$TOKEN", token), token)

    def codex_answer(self, text, token):
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        response = {"id": "resp_1", "object": "response", "status": "completed", "model": "scripted",
                    "output": [item], "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
        events = [{"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
                  {"type": "response.output_item.added", "output_index": 0,
                   "item": {**item, "status": "in_progress", "content": []}},
                  {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                   "item_id": "msg_1", "delta": text},
                  {"type": "response.output_item.done", "output_index": 0, "item": item},
                  {"type": "response.completed", "response": response}]
        for event in events:
            data = json.dumps(event).encode()
            at = data.find(token[len(token) // 2:].encode()) if token else -1
            if event["type"] == "response.output_text.delta" and at > 0:
                self.wfile.write(ws_frame(0x1, data[:at], fin=False) + ws_frame(0x0, data[at:]))
            else:
                self.wfile.write(ws_frame(0x1, data))
        self.wfile.flush()


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def log_line(entry):
    with lock:
        with open(log_path, "a") as log:
            log.write(json.dumps(entry) + "\n")


def ws_frame(opcode, payload, fin=True):
    """A server frame (RFC 6455 section 5.2: never masked)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def read_ws_message(rfile, wfile):
    """The next data message from the client, fragments joined; None at a
    close frame or the end of the stream. Pings are answered."""
    parts = []
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return None
        fin, opcode, masked, n = head[0] & 0x80, head[0] & 0x0F, head[1] & 0x80, head[1] & 0x7F
        if n == 126:
            n = struct.unpack("!H", rfile.read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", rfile.read(8))[0]
        mask = rfile.read(4) if masked else b"\0\0\0\0"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(rfile.read(n)))
        if opcode == 0x8:
            wfile.write(ws_frame(0x8, payload[:2]))
            wfile.flush()
            return None
        if opcode == 0x9:
            wfile.write(ws_frame(0xA, payload))
            wfile.flush()
            continue
        if opcode in (0x0, 0x1, 0x2):
            parts.append(payload)
            if fin:
                return b"".join(parts).decode()


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
