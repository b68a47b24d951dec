"""Running reconciles: one work queue per controller, a shared concurrency limit, barriers
(``runner``), and the per-controller reconcile metrics (``metrics``)."""
