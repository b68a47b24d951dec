"""Server-side apply for the embedded cluster: structured-merge-diff's field sets and merge,
and kube-apiserver's ``managedFields`` bookkeeping, as pure functions over JSON objects.

- ``fieldpath``: field sets in the ``FieldsV1`` shape and their set operations;
- ``types``: how each position of an object merges (CRD schemas, built-in type tables);
- ``fieldset``: the field set of an object and the comparison of two objects;
- ``merge``: merging an applied configuration, pruning what its manager stopped applying;
- ``managed``: Update and Apply operations over ``managedFields`` entries, conflicts.

Nothing here does I/O or knows the HTTP layer; ``loadtest.apiserver.ownership`` and
``loadtest.apiserver.applying`` connect it to the endpoints.
"""
