"""A worker's end of the worker link: the DEALER socket (``dealer``), the worker's standing with
the coordinator (``standing``: epoch, slots, contact), the snapshots it fetches
(``snapshots``), the loop that joins, heartbeats and feeds the runner (``membership``), and the
writes and hook calls fenced by the standing (``fencing``)."""
