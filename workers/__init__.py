"""The workers: workqueues and rate limits, the reconcile runner, hooks, children, apply."""
