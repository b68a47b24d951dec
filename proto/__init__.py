"""Everything the coordinator and the workers must agree on, and no application logic.

- ``proto.kube``: the asyncio Kubernetes REST client both sides use.
- ``proto.api``: Metacontroller API views, the hook contract, Go-compatible JSON.
- ``proto.wire``: the ZeroMQ messages, their msgpack codec, keys and slots (no I/O).
- ``proto.runtime.logs``: the structlog configuration shared by both applications.
- ``proto.runtime.clock``: time as a dependency (real and fake clocks).

``proto`` never imports ``manager``, ``workers`` or ``loadtest`` (enforced by import-linter).
"""
