"""Leader election on a ``coordination.k8s.io/v1`` Lease: client-go's algorithm (``elector``), its
settings (``config``), the Lease record (``lease``) and its metrics (``metrics``)."""
