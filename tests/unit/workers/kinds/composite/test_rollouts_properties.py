"""Rolling updates through the composite reconciler: Hypothesis over sequences of events."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.workers.kinds.composite.test_rollouts import (
    change_image,
    child_writes,
    ready,
    rolling_world,
)


@settings(max_examples=25, deadline=None)
@given(
    method=st.sampled_from(["RollingRecreate", "RollingInPlace"]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["sync", "sync", "change", "ready", "unready"]), st.integers(0, 2)
        ),
        max_size=30,
    ),
)
def test_every_sync_writes_revisions_first_and_moves_at_most_one_child(
    method: str, steps: list[tuple[str, int]]
) -> None:
    """Any interleaving of syncs, template changes and readiness changes."""

    async def run() -> None:
        world = rolling_world(method)
        await world.parent(spec={"replicas": 3, "image": "v0"})
        version = 0
        for action, index in steps:
            name = f"p-{index}"
            if action == "change":
                version += 1
                await change_image(world, f"v{version}")
            elif action in ("ready", "unready") and world.get(name) is not None:
                ready(world, name, value="True" if action == "ready" else "False")
            elif action == "sync":
                await world.sync()
                kinds = [resource for _, resource, _, _, _ in world.writes()]
                if "configmaps" in kinds and "controllerrevisions" in kinds:
                    last_revision = max(
                        i for i, k in enumerate(kinds) if k == "controllerrevisions"
                    )
                    assert last_revision < kinds.index("configmaps")
                moves = [w for w in child_writes(world) if w[0] in ("PUT", "DELETE")]
                assert len(moves) <= 1, moves

    asyncio.run(run())
