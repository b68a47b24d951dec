"""Shared fixtures. Paths to the shared fixtures beside the checkout (``../shared``)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"the shared fixtures are expected at {SHARED}")
    return SHARED
