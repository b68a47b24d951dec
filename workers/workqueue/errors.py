"""What the work queue raises, by what the caller should do about it.

```
WorkQueueError            anything this package raises
├── ShutDown              get(): the queue is shut down and empty; the consumer should exit
├── NotProcessing         done(): the item was not handed out by get(); a caller bug
├── InvalidDelay          add_after(): the delay is NaN or infinite; a caller bug
│                         (also a ValueError)
└── InvalidPriority       add*(): the priority is not a Priority; a caller bug
                          (also a ValueError)
```

A caller bug is reported before the queue changes anything.
"""

from __future__ import annotations


class WorkQueueError(Exception):
    """Base class of the work queue's errors."""


class ShutDown(WorkQueueError):
    """The queue is shut down and has nothing left to hand out: stop consuming."""


class NotProcessing(WorkQueueError):
    """``done(item)`` for an item that is not being processed."""

    def __init__(self, item: object) -> None:
        super().__init__(f"done({item!r}): the item is not being processed")
        self.item = item


class InvalidDelay(WorkQueueError, ValueError):
    """``add_after`` with a delay that is not a finite number of seconds."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"a delay must be a finite number of seconds, not {seconds!r}")
        self.seconds = seconds


class InvalidPriority(WorkQueueError, ValueError):
    """An add with a priority the queue does not have."""

    def __init__(self, priority: object) -> None:
        super().__init__(f"{priority!r} is not a work queue priority")
        self.priority = priority
