"""Calling Metacontroller hooks over HTTP: the webhook executor, its errors and metrics.

Workers call sync and finalize hooks; the coordinator calls customize hooks. Both use this.
"""
