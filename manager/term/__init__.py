"""One leadership term: its composition (``term``), the slot table (``membership``), the
conversations with workers (``sessions``), what is sent to them (``dispatch``), snapshots
(``snapshots``), re-reconciles (``resync``) and the wait before the first assignment
(``grace``)."""
