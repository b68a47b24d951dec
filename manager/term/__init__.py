"""One leadership term: its wiring (``term``), the slot table (``membership``), the conversations
with workers (``sessions``), what is sent to them (``dispatch``), snapshots (``snapshots``,
``snapshot_server``), periodic resyncs (``resync``) and the wait before the first assignment
(``grace``)."""
