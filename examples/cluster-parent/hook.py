"""The cluster-scoped parent example: a Team gets a Namespace and a members ConfigMap in it.

The parent has no namespace, so its children name theirs. The ConfigMap is asked for only
once the Namespace is observed (a create in a namespace that does not exist yet would fail
and be retried): the sync hook sees what exists and answers step by step. Hook version v2
keys the children by ``namespace/name``.

Run it with ``python3 hook.py [PORT]`` (default 8084). Python's standard library only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    team = request["parent"]
    name = team["metadata"]["name"]
    namespace = f"team-{name}"
    members = (team.get("spec") or {}).get("members") or []
    children = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    if namespace in request["children"].get("Namespace.v1", {}):
        children.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "members", "namespace": namespace},
                "data": {"members": ",".join(members)},
            }
        )
    return {"status": {"namespace": namespace, "members": len(members)}, "children": children}


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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8084
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"cluster-parent hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
