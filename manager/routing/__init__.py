"""From informer events to parent keys: the ``router`` and the customize hooks' ``related``
objects."""
