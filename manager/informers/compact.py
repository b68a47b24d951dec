"""Compact forms of the two per-object strings the store keeps: resourceVersion and uid.

A resourceVersion of ``"1048576"`` is a 56-byte string, a uid of
``"0b6e2c36-4c1a-4f5e-9a41-2f8e7d0c9b1a"`` an 85-byte one (64 and 96 once allocated); as
integers they take 28 and 44 bytes (32 and 48). At 400,000 cached objects that is 32 MB.

- ``compact_version`` makes an int of a resourceVersion written as a canonical decimal
  (digits only, no leading zero but ``"0"``); any other string stays as it is: a
  resourceVersion is opaque by contract, and only what the Kubernetes API server writes
  (etcd revisions) takes the compact form.
- ``compact_uid`` makes an int of a uid written as a canonical UUID (lowercase hex in the
  8-4-4-4-12 layout, as the API server writes them); any other string stays as it is.
- ``version_text`` and ``uid_text`` give the string back, equal to the original: a compact
  form is taken only for canonical text, which it rebuilds, so the round trip is exact, and
  two compact values are equal exactly when the strings they stand for are (an int never
  equals a str, and a string kept as such is never canonical).
"""

from __future__ import annotations

_UUID_LENGTH = 36


def compact_version(text: str) -> int | str:
    """``text`` as an int when it is a canonical decimal, else ``text`` itself."""
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return int(text)
    return text


def version_text(version: int | str) -> str:
    """The resourceVersion ``compact_version`` was given."""
    return str(version) if isinstance(version, int) else version


def compact_uid(text: str) -> int | str:
    """``text`` as an int when it is a canonical UUID, else ``text`` itself."""
    if len(text) != _UUID_LENGTH or text[8] != "-" or text[13] != "-" or text[18] != "-":
        return text
    digits = text.replace("-", "")
    # Exactly the four dashes, then 32 ASCII letters or digits of which none is upper case;
    # int() refuses any that is not hex (it would take signs, spaces and underscores).
    if (
        len(digits) == 32
        and text[23] == "-"
        and digits.isascii()
        and digits.isalnum()
        and (digits.islower() or digits.isdigit())
    ):
        try:
            return int(digits, 16)
        except ValueError:
            pass
    return text


def uid_text(uid: int | str) -> str:
    """The uid ``compact_uid`` was given."""
    return _uuid(uid) if isinstance(uid, int) else uid


def _uuid(value: int) -> str:
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
