"""The hello-world sync hook: one ConfigMap per HelloWorld, holding its greeting.

Run it with ``python3 hook.py [PORT]`` (default 8080); it serves ``POST /sync`` on
127.0.0.1. Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    """The sync hook: desired children and status from the observed parent and children."""
    parent = request["parent"]
    name = parent["metadata"]["name"]
    who = (parent.get("spec") or {}).get("who") or "world"
    greeting = f"Hello, {who}!"
    # Observed children, keyed by "<Kind>.<apiVersion>" then by name.
    observed = request["children"].get("ConfigMap.v1", {})
    current = observed.get(f"{name}-greeting", {}).get("data", {}).get("greeting")
    return {
        "status": {"greeting": current},  # what the cluster holds now
        "children": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{name}-greeting"},
                "data": {"greeting": greeting},
            }
        ],
    }


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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"hello-world hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
