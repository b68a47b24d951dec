"""The workers: the runtime (link, membership, runner, workqueues and rate limits), dynamic
apply (``apply``), what controller kinds share (``sync``: the sync template, claims, children
plans, finalizers, status, hook calls) and one package per controller kind (``kinds``)."""
