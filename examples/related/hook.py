"""The related-resources example: a Mirror copies the data of its source ConfigMap.

``POST /customize`` names the source (a related resource); ``POST /sync`` (hook version
v2: maps keyed ``namespace/name``) copies its data into the child ConfigMap
``<mirror>-mirror`` and reports in the status whether the source was found. metashard calls
sync again when the source changes, so the copy follows it.

Run it with ``python3 hook.py [PORT]`` (default 8082). Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def customize(request):
    parent = request["parent"]
    source = (parent.get("spec") or {}).get("source")
    if not source:
        return {"relatedResources": []}
    rule = {
        "apiVersion": "v1",
        "resource": "configmaps",
        "namespace": parent["metadata"]["namespace"],
        "names": [source],
    }
    return {"relatedResources": [rule]}


def sync(request):
    parent = request["parent"]
    meta = parent["metadata"]
    source_name = (parent.get("spec") or {}).get("source", "")
    related = request.get("related", {}).get("ConfigMap.v1", {})
    source = related.get(f"{meta['namespace']}/{source_name}")
    if source is None:
        return {"status": {"source": "missing"}, "children": []}
    copy = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{meta['name']}-mirror"},
        "data": source.get("data") or {},
    }
    return {"status": {"source": "found"}, "children": [copy]}


HOOKS = {"/customize": customize, "/sync": sync}


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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8082
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"related-resources hooks on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()
