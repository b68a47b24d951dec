"""The finalizer example's hooks: a ticket ConfigMap per Reservation, released on deletion.

``POST /sync`` wants the ticket; ``POST /finalize`` (called instead of sync once the
Reservation is being deleted) wants no children, so metashard deletes the ticket, and
answers ``finalized: true`` only once no ticket is observed any more. Until then metashard
keeps the finalizer and calls the hook again (on the next change of a child, or after
``resyncAfterSeconds``).

Run it with ``python3 hook.py [PORT]`` (default 8081). Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    parent = request["parent"]
    name = parent["metadata"]["name"]
    seat = (parent.get("spec") or {}).get("seat", "")
    ticket = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-ticket"},
        "data": {"seat": seat},
    }
    held = len(request["children"].get("ConfigMap.v1", {}))
    return {"status": {"tickets": held}, "children": [ticket]}


def finalize(request):
    held = len(request["children"].get("ConfigMap.v1", {}))
    # No children wanted: metashard deletes the ticket. Finalized once it is gone.
    return {"children": [], "finalized": held == 0, "resyncAfterSeconds": 1 if held else 0}


HOOKS = {"/sync": sync, "/finalize": finalize}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        hook = HOOKS.get(self.path)
        if hook is None:
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(hook(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8081
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"finalizer hooks on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()
