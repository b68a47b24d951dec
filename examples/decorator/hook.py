"""The decorator example: annotate a ConfigMap with the SHA-256 digest of its data.

A DecoratorController's sync hook gets the decorated ``object`` (and its ``attachments``)
and answers the ``labels`` and ``annotations`` to merge into it (a ``null`` value removes
one), an optional ``status``, and the attachments it wants. Here: one annotation, no
attachments.

Run it with ``python3 hook.py [PORT]`` (default 8083). Python's standard library only.
"""

import hashlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANNOTATION = "examples.metashard.io/sha256"


def sync(request):
    data = request["object"].get("data") or {}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return {"annotations": {ANNOTATION: digest}, "attachments": []}


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
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8083
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"decorator hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
