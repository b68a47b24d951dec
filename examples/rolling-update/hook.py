"""The rolling-update sync hook: ``spec.replicas`` Pods from ``spec.template`` per PodSet.

Run it with ``python3 hook.py [PORT]`` (default 8085); it serves ``POST /sync`` on
127.0.0.1. Python's standard library only.

The Pods are ``<name>-<ordinal>``, listed highest ordinal first: under ``RollingRecreate``
metashard moves them to a new revision in the order the hook returns them, as a
StatefulSet does. The hook knows nothing about revisions: metashard calls it once per
revision that still owns Pods, each time with that revision's parent.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def ready(pod):
    """Whether the Pod's ``Ready`` condition is ``True``."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def sync(request):
    """The sync hook: desired Pods and status from the observed parent and Pods."""
    parent = request["parent"]
    name = parent["metadata"]["name"]
    spec = parent.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{ordinal}", "labels": dict(labels)},
            "spec": template.get("spec") or {},
        }
        for ordinal in reversed(range(int(spec.get("replicas") or 0)))
    ]
    # Observed children, keyed by "<Kind>.<apiVersion>" then by name.
    observed = request["children"].get("Pod.v1", {})
    return {
        "status": {
            "replicas": len(observed),
            "readyReplicas": sum(1 for pod in observed.values() if ready(pod)),
        },
        "children": pods,
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
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8085
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"rolling-update hook on http://127.0.0.1:{port}/sync", flush=True)
    server.serve_forever()
