"""From informer events to parent keys: the ``router`` (with the index of all parent keys and
where keys go) and the customize hooks' ``related`` objects."""
