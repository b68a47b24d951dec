"""A worker's end of the worker link: the DEALER socket (``dealer``), its standing with the
coordinator (``membership``) and the writes and hook calls fenced by it (``fencing``)."""
