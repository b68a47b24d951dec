"""From informer events to parent keys: the ``router``, the customize hooks' ``related`` objects,
and where keys go and are indexed (``keys``)."""
