"""manager.cli.objects: naming one object of the cluster on a command line."""

from __future__ import annotations

import argparse

import pytest

from manager.cli.objects import CommandError, find_resource, parent_argument
from proto.kube.resources import Resource


def test_find_resource() -> None:
    things = Resource("example.com", "v1", "things", "Thing", True, short_names=("th",))
    others = Resource("other.io", "v1", "things", "Thing", True)
    status = Resource("example.com", "v1", "things/status", "Thing", True)
    assert find_resource([things, status], "Thing") is things
    assert find_resource([things, others], "things.other.io") is others
    assert find_resource([things], "th") is things
    with pytest.raises(CommandError, match="ambiguous"):
        find_resource([things, others], "things")
    with pytest.raises(CommandError, match="no resource"):
        find_resource([things], "widgets")


def test_a_parent_is_named_resource_slash_name() -> None:
    assert parent_argument("things/x") == ("things", "x")
    for text in ("things", "/x", "things/"):
        with pytest.raises(argparse.ArgumentTypeError, match="RESOURCE/NAME"):
            parent_argument(text)
