"""The embedded cluster: an in-memory Kubernetes API server emulator (see README.md)."""

from loadtest.apiserver.cluster import EmbeddedCluster, Settings

__all__ = ["EmbeddedCluster", "Settings"]
