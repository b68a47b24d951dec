"""The coordinator's end of the worker link: the ROUTER socket (``router``), CURVE
authentication of its peers (``auth``), and the accounting of the peers refused
(``refusals``)."""
