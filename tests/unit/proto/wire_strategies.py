"""Hypothesis strategies for every wire message (shared by the wire tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from proto.wire import (
    Assign,
    Bye,
    ControllerDef,
    ControllerKind,
    Controllers,
    Done,
    Fetch,
    Heartbeat,
    Hello,
    Keys,
    Nack,
    NackReason,
    ParentKey,
    Priority,
    Released,
    ResourceInfo,
    Revoke,
    Snapshot,
    Welcome,
)

text = st.text(max_size=20)
uints = st.integers(min_value=0, max_value=2**64 - 1)
small = st.integers(min_value=0, max_value=2**31)
seconds = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
blobs = st.binary(max_size=64)
slot_lists = st.lists(st.integers(min_value=0, max_value=1023), max_size=16).map(tuple)
parent_keys = st.builds(ParentKey, text, text, text, text, text)
key_lists = st.lists(parent_keys, max_size=8).map(tuple)
blob_lists = st.lists(blobs, max_size=4).map(tuple)
groups = st.dictionaries(text, blob_lists, max_size=3)

resources = st.builds(
    ResourceInfo,
    api_version=text,
    resource=text,
    kind=text,
    namespaced=st.booleans(),
    subresources=st.lists(text, max_size=3).map(tuple),
)
controllers = st.builds(
    ControllerDef,
    kind=st.sampled_from(ControllerKind),
    name=text,
    uid=text,
    resource_version=text,
    object=blobs,
    resources=st.lists(resources, max_size=3).map(tuple),
    connections=blobs,
)
controller_lists = st.lists(controllers, max_size=3).map(tuple)

MESSAGES: dict[type, st.SearchStrategy[Any]] = {
    Hello: st.builds(Hello, text, text, small, small, st.booleans()),
    Welcome: st.builds(
        lambda epoch, coordinator, incarnation, controllers, count, slots, interval, more, gen: (
            Welcome(
                epoch,
                coordinator,
                incarnation,
                controllers,
                count,
                slots,
                interval,
                interval + more,
                gen,
            )
        ),
        uints,
        text,
        text,
        controller_lists,
        st.integers(min_value=1024, max_value=2**31),  # every slot of slot_lists is below it
        slot_lists,
        st.floats(min_value=1e-3, max_value=1e6),
        seconds,
        uints,
    ),
    Controllers: st.builds(Controllers, uints, controller_lists),
    Assign: st.builds(Assign, uints, slot_lists, key_lists, uints),
    Revoke: st.builds(Revoke, uints, slot_lists),
    Released: st.builds(Released, uints, slot_lists),
    Keys: st.builds(Keys, uints, st.sampled_from(Priority), key_lists),
    Fetch: st.builds(Fetch, uints, uints, parent_keys, st.dictionaries(text, text, max_size=3)),
    Snapshot: st.builds(
        Snapshot,
        uints,
        uints,
        parent_keys,
        st.none() | blobs,
        groups,
        blob_lists,
        groups,
        st.dictionaries(text, groups, max_size=2),
        st.booleans(),
    ),
    Done: st.builds(Done, uints, parent_keys),
    Nack: st.builds(Nack, uints, uints, st.sampled_from(NackReason), text),
    Heartbeat: st.builds(Heartbeat, uints, small, small),
    Bye: st.builds(Bye, text),
}

messages = st.one_of(*MESSAGES.values())

# Any value msgpack can carry (keys of maps are strings, as the decoder demands).
msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | text
    | blobs,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(text, inner, max_size=6),
    max_leaves=30,
)
