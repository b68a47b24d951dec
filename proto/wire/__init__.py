"""The coordinator/worker wire protocol: messages, msgpack codec, keys and slots.

Pure: this package imports no I/O library (enforced by import-linter).
"""
