"""The embedded cluster: an in-memory Kubernetes API server emulator (see README.md)."""

from loadtest.apiserver.clock import ManualClock, RealClock
from loadtest.apiserver.cluster import EmbeddedCluster, Settings

__all__ = ["EmbeddedCluster", "ManualClock", "RealClock", "Settings"]
