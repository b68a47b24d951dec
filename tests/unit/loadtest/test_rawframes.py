"""loadtest.bench._rawframes: the links' floor moves every frame, past the high-water marks."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.bench import _rawframes


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_every_message_arrives_even_past_the_high_water_marks(tmp_path: Path) -> None:
    # 5,000 frames: more than the 1,000 + 1,000 the default send and receive marks hold, so
    # the sender must wait for room (a ROUTER would otherwise drop them and this would hang).
    rate = await _rawframes.messages(f"ipc://{tmp_path}/m.sock", b"k" * 200, 5_000)
    assert rate > 0


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_round_trips_complete_with_a_window_in_flight(tmp_path: Path) -> None:
    rate = await _rawframes.round_trips(f"ipc://{tmp_path}/r.sock", b"s" * 3_500, b"f", 500)
    assert rate > 0
