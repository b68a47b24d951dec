"""The scale benchmark's pictures: one PNG per phase, drawn with matplotlib from the records.

``<out>/<phase>.png`` has two panels over the phase's seconds (0 = the phase's start): above,
what the phase counts (``progress_of``: parents converged, hook calls), one line per
configuration; below, the resident memory of each process (MB), one line per configuration
and process. matplotlib comes with the ``bench`` extra; without it ``available()`` is False
and the benchmark says so instead of drawing.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path

from loadtest.bench._scale_config import PHASES
from loadtest.bench._scale_report import MB, TITLES, Record, median_runs


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def plot(records: Sequence[Record], out: Path) -> list[Path]:
    """Write one picture per phase present in ``records`` (the median run of each label and
    phase, ``_scale_report.median_runs``) into ``out``; the paths written."""
    from matplotlib.figure import Figure  # the bench extra: imported only when drawing

    last = list(median_runs(records).values())
    written = []
    for phase in PHASES:
        rows = [r for r in last if r["phase"] == phase and r.get("series")]
        if not rows:
            continue
        fig = Figure(figsize=(10, 8), layout="constrained")
        above, below = fig.subplots(2, 1, sharex=True)
        for r in rows:
            series = r["series"]
            above.plot(series["t"], series["progress"], label=str(r["label"]))
            for role, values in sorted(series["rss"].items()):
                mb = [math.nan if v is None else v / MB for v in values]
                below.plot(series["t"], mb, label=f"{r['label']} {role}")
        first = rows[0]
        fig.suptitle(f"{TITLES[phase]}\nN={first['n']} parents x K={first['k']} ConfigMaps")
        above.set_ylabel(" / ".join(sorted({str(r["progress_of"]) for r in rows})))
        below.set_ylabel("RSS per process (MB)")
        below.set_xlabel("seconds since the phase started")
        for axes in (above, below):
            axes.grid(alpha=0.3)
            axes.legend(fontsize="small", loc="best")
        path = out / f"{phase}.png"
        fig.savefig(path, dpi=100)
        written.append(path)
    return written
