"""``metashard dev`` (``command``) and ``make demo`` (``demo``): the embedded cluster, manifests
(``manifests``, ``crds``) and metashard's own processes on this machine (``processes``)."""
