"""What every controller kind's reconciler shares: the sync template (``template``: one sync
of one parent, each kind supplying its steps), claims and adoption, children plans and their
writes, finalizers, status, hook calls and their requests, events, observed objects.

This package imports no controller kind (``workers.kinds``); the kinds import it.
"""
