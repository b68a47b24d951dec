"""The limits sync hook: a Quote's price from a slow pricing service that must not be flooded.

Each call stands for a request to a pricing service that takes 0.3 s and serves at most two
requests at once; the controller's annotations keep metashard within that however many workers
it runs (``metashard.io/max-concurrent-reconciles: "2"``). The answer says it stays valid for
a minute (``ttlSeconds: 60``): a resync of a Quote that has not changed reuses it, without a
call. The hook counts what it sees: ``GET /stats`` answers the most calls it had at once and
the calls per Quote.

Run it with ``python3 hook.py [PORT]`` (default 8087): ``POST /sync`` on 127.0.0.1. Python's
standard library only.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PRICES = {"bolt": 0.12, "nut": 0.05, "washer": 0.02, "screw": 0.08, "rivet": 0.10, "pin": 0.01}
LOCK = threading.Lock()
STATS = {"running": 0, "peak": 0, "calls": {}}


def sync(request):
    """The answer for a sync request: the price, valid for 60 s for the same Quote."""
    parent = request["parent"]
    spec = parent.get("spec") or {}
    name = parent["metadata"]["name"]
    with LOCK:
        STATS["running"] += 1
        STATS["peak"] = max(STATS["peak"], STATS["running"])
        STATS["calls"][name] = STATS["calls"].get(name, 0) + 1
    try:
        time.sleep(0.3)  # the pricing service at work
        price = PRICES.get(spec.get("item"), 1.0) * int(spec.get("quantity") or 0)
    finally:
        with LOCK:
            STATS["running"] -= 1
    return {"status": {"price": f"{price:.2f}"}, "children": [], "ttlSeconds": 60}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/sync":
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.answer(sync(request))

    def do_GET(self):
        if self.path != "/stats":
            self.send_error(404)
            return
        with LOCK:
            self.answer({"peak": STATS["peak"], "calls": dict(STATS["calls"])})

    def answer(self, answer):
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8087
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"limits hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
