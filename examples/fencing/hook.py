"""The fencing sync hook: it acts outside Kubernetes, so it refuses stale attempts.

For each Notice it publishes ``spec.message`` to an outbox, once per ``metadata.generation``:
a side effect no Kubernetes write can undo or fence (the outbox stands for a mailer, a payment
API, a database). metashard promises that no two workers start work on one parent at once
only while no process pauses for longer than a margin (``docs/hooks.md``); beyond it, or
for a call already running when the parent moved to another worker, two attempts can reach
this hook at once, or an old one after a new one. Every request says which attempt it
belongs to (the ``X-Metashard-*`` headers), and the pair (epoch, slot generation) grows with
every worker the parent is given to. So the hook keeps, per parent uid, the largest pair it
acted on, and answers 409 to a smaller one, checking and publishing under one lock: an
attempt older than one it acted on never publishes. (A real outbox keeps the pair next to
the data and checks it in the same transaction; this one keeps both in memory.)

Run it with ``python3 hook.py [PORT]`` (default 8086): ``POST /sync`` on 127.0.0.1, and
``GET /outbox`` lists what was published. Python's standard library only.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
NEWEST = {}  # parent uid -> (epoch, slot generation) of the newest attempt acted on
PUBLISHED = {}  # parent uid -> the generation whose message was published
OUTBOX = []  # what was published, in order


def token(headers):
    """The attempt's fencing token: compare it as a pair."""
    return (
        int(headers.get("X-Metashard-Epoch", 0)),
        int(headers.get("X-Metashard-Slot-Generation", 0)),
    )


def sync(request, headers):
    """(status, answer) for a sync request and its headers."""
    parent = request["parent"]
    meta = parent["metadata"]
    uid, generation = meta["uid"], meta.get("generation", 0)
    message = (parent.get("spec") or {}).get("message", "")
    mine = token(headers)
    with LOCK:
        newest = NEWEST.get(uid, (0, 0))
        if mine < newest:
            return 409, {"error": f"stale attempt: token {list(mine)} < {list(newest)}"}
        NEWEST[uid] = mine
        if PUBLISHED.get(uid) != generation:
            PUBLISHED[uid] = generation
            OUTBOX.append(
                {
                    "uid": uid,
                    "generation": generation,
                    "message": message,
                    "token": list(mine),
                    "attempt": headers.get("X-Metashard-Attempt", ""),
                }
            )
    receipt = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{meta['name']}-receipt"},
        "data": {"message": message, "generation": str(generation)},
    }
    return 200, {"status": {"publishedGeneration": generation}, "children": [receipt]}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/sync":
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, answer = sync(request, self.headers)
        self.answer(status, answer)

    def do_GET(self):
        if self.path != "/outbox":
            self.send_error(404)
            return
        with LOCK:
            self.answer(200, list(OUTBOX))

    def answer(self, status, answer):
        body = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8086
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"fencing hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
