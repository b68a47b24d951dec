from __future__ import annotations

import orjson

from loadtest.bench.watch_decode import _stream, pod
from proto.kube.watch import LineSplitter, decode_event


def test_the_benchmark_pods_have_the_advertised_sizes() -> None:
    small, large = orjson.dumps(pod(7, large=False)), orjson.dumps(pod(7, large=True))
    assert 2800 < len(small) < 3600
    assert 6400 < len(large) < 7600
    assert "managedFields" in pod(7, large=True)["metadata"]


def test_the_benchmark_stream_decodes_through_the_client_path() -> None:
    stream = _stream(50, large=True)
    events = [decode_event(line) for line in LineSplitter().feed(stream)]
    assert [e.resource_version for e in events] == [str(100000 + i) for i in range(50)]
    assert orjson.loads(events[3].raw) == pod(3, large=True)
