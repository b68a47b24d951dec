"""The coordinator's end of the worker link: the ROUTER socket (``router``) and CURVE
authentication of its peers (``auth``)."""
