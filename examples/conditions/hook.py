"""The bulletins sync hook: one ConfigMap per Bulletin, and a condition and events about it.

Run it with ``python3 hook.py [PORT]`` (default 8086); it serves ``POST /sync`` on
127.0.0.1. Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def condition(status, reason, message):
    return {"type": "Published", "status": status, "reason": reason, "message": message}


def event(type, reason, message):
    return {"type": type, "reason": reason, "message": message}


def sync(request):
    """Desired ConfigMap; the ``Published`` condition and events from what is observed."""
    parent = request["parent"]
    name = parent["metadata"]["name"]
    text = (parent.get("spec") or {}).get("text") or ""
    board = f"{name}-board"
    observed = request["children"].get("ConfigMap.v1", {}).get(board)
    on_board = (observed or {}).get("data", {}).get("text")
    children, events = [], []
    if not text:
        published = condition("False", "NothingToPublish", "spec.text is empty")
        events.append(event("Warning", "EmptyText", "spec.text is empty: nothing to publish"))
    else:
        children.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": board},
                "data": {"text": text},
            }
        )
        if on_board == text:
            published = condition("True", "OnBoard", f"ConfigMap {board} holds the text")
        else:
            published = condition("False", "Publishing", f"writing ConfigMap {board}")
            events.append(event("Normal", "Publishing", f"writing the text to ConfigMap {board}"))
    return {
        "status": {"board": board if children else None},
        "children": children,
        # metashard merges these by type into status.conditions, keeping lastTransitionTime
        # while a condition's status stays the same (an unchanged answer writes nothing)...
        "conditions": [published],
        # ...and puts these on the Bulletin (repeats are aggregated, as its own events are).
        "events": events,
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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8086
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"bulletins hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
