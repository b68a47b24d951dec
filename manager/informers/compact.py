"""A compact form of a per-object string the store keeps: the resourceVersion.

A resourceVersion of ``"1048576"`` is a 56-byte string (64 once allocated); as an integer it
takes 28 bytes (32). At 400,000 cached objects that is 12.8 MB.

- ``compact_version`` makes an int of a resourceVersion written as a canonical decimal
  (digits only, no leading zero but ``"0"``); any other string stays as it is: a
  resourceVersion is opaque by contract, and only what the Kubernetes API server writes
  (etcd revisions) takes the compact form.
- ``version_text`` gives the string back, equal to the original: the compact form is taken
  only for canonical text, which it rebuilds, so the round trip is exact, and two compact
  values are equal exactly when the strings they stand for are (an int never equals a str,
  and a string kept as such is never canonical).
"""

from __future__ import annotations


def compact_version(text: str) -> int | str:
    """``text`` as an int when it is a canonical decimal, else ``text`` itself."""
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return int(text)
    return text


def version_text(version: int | str) -> str:
    """The resourceVersion ``compact_version`` was given."""
    return str(version) if isinstance(version, int) else version
