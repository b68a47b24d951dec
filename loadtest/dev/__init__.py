"""``metashard dev`` (``command``) and ``make demo`` (``demo``): the embedded cluster, manifests
(``manifests``, ``crds``), metashard's own processes on this machine (``processes``) and hooks
served by this process (``webhook``)."""
