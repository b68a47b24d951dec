"""The signs sync hook: one ConfigMap per Sign, with its text and the hook's motto.

Run it with ``python3 hook.py [PORT] [MOTTO_FILE]`` (default 8087 and ``motto.txt`` in the
current directory); it serves ``POST /sync`` on 127.0.0.1. The motto is read from the file at
every call: changing it stands for a new hook deployment, whose answers change while no Sign
does. Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MOTTO_FILE = Path("motto.txt")


def motto():
    try:
        return MOTTO_FILE.read_text().strip()
    except FileNotFoundError:
        return ""


def sync(request):
    """The desired ConfigMap: the Sign's text and the motto of the moment."""
    parent = request["parent"]
    text = (parent.get("spec") or {}).get("text") or ""
    shows = f"{text} ({motto()})"
    sign = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{parent['metadata']['name']}-sign"},
        "data": {"text": shows},
    }
    return {"status": {"shows": shows}, "children": [sign]}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/sync":
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(sync(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass  # one line per call would drown the controller's own log


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8087
    MOTTO_FILE = Path(sys.argv[2] if len(sys.argv) > 2 else "motto.txt")
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"signs hook on http://127.0.0.1:{port}/sync, motto from {MOTTO_FILE}", flush=True)
    server.serve_forever()
