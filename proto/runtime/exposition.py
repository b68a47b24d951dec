"""One Prometheus exposition out of several processes' metrics (pure).

``metashard run`` serves every local process's metrics from the coordinator's address, so the
operator scrapes one endpoint. The coordinator reads each worker's exposition (text format
0.0.4) and ``merge`` folds them into its own metric families:

- A worker's samples carry one more label, ``label=<worker id>`` (``worker``). A sample that
  already has that label keeps its value as ``exported_<label>``, as Prometheus does with
  ``honor_labels: false``.
- Families are merged by name: one ``# HELP``/``# TYPE`` block per metric name, however many
  processes export it (the text format allows no repeats). A worker family whose type differs
  from the coordinator's family of the same name is left out (never mixed).
- ``<up_name>{label=<id>}`` is 1 for each worker whose exposition was read and 0 for one that
  did not answer, so a missing worker is visible rather than silently absent.
- ``*_created`` samples of counters, histograms and summaries are dropped everywhere
  (``without_created``, and in what the workers send): they double the series count and
  nothing here reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

_CREATED_TYPES = frozenset({"counter", "histogram", "summary", "gaugehistogram"})


def _copy(family: Metric, samples: Iterable[Sample]) -> Metric:
    out = Metric(family.name, family.documentation, family.type, family.unit)
    out.samples = list(samples)
    return out


def without_created(families: Iterable[Metric]) -> Iterator[Metric]:
    """The families with their ``<name>_created`` samples removed."""
    for family in families:
        if family.type not in _CREATED_TYPES:
            yield family
            continue
        created = family.name + "_created"
        yield _copy(family, (s for s in family.samples if s.name != created))


def _parse(text: str | None) -> list[Metric] | None:
    if text is None:
        return None
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return None
    # Text format 0.0.4 has no _created samples: they arrive as gauges of their own.
    bases = {f.name for f in families if f.type in _CREATED_TYPES}
    return [f for f in families if not (f.name.endswith("_created") and f.name[:-8] in bases)]


def _relabel(sample: Sample, label: str, value: str) -> Sample:
    labels = dict(sample.labels)
    if label in labels:
        labels[f"exported_{label}"] = labels[label]
    labels[label] = value
    return Sample(sample.name, labels, sample.value, sample.timestamp, sample.exemplar)


def merge(
    local: Iterable[Metric],
    remote: Mapping[str, str | None],
    *,
    label: str,
    up_name: str,
    up_help: str,
) -> list[Metric]:
    """``local`` families plus every ``remote[value]`` exposition labelled ``label=value``.

    ``remote`` maps a process's label value to its exposition text, or None when it could
    not be read. Text that is not a valid exposition counts as not read (``up`` 0).
    """
    families: dict[str, Metric] = {f.name: _copy(f, f.samples) for f in local}
    up = Metric(up_name, up_help, "gauge")
    for value, text in sorted(remote.items()):
        parsed = _parse(text)
        up.samples.append(Sample(up_name, {label: value}, 0.0 if parsed is None else 1.0))
        for family in parsed or ():
            target = families.get(family.name)
            if target is None:
                target = families[family.name] = _copy(family, ())
            elif target.type != family.type:
                continue
            target.samples.extend(_relabel(s, label, value) for s in family.samples)
    families[up_name] = up
    return list(families.values())
