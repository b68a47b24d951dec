"""Metacontroller's API as metashard speaks it: object views, the hook contract, Go JSON."""
