"""The runtime every metashard process shares: clock, logs, flags, start-up, the HTTP client
and server, the operations endpoints, credentials redaction, and the worker link's socket and
CURVE keys. Infrastructure, not protocol: nothing here is a message both sides must agree on."""
