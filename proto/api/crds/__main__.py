"""Write the CRDs as YAML files: ``python -m proto.api.crds --yaml DIR``.

The JSON files beside this module are the one source of the CRDs. This writes one
``<plural>.<group>.yaml`` per CRD into ``DIR`` (the chart's ``crds/`` folder is such a copy,
checked for drift by the tests), each opening with a comment naming its source. ``--check``
writes nothing and exits 1 when a file in ``DIR`` differs from what would be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from proto.api.crds import yaml_documents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proto.api.crds", description="Write the CRDs as YAML files."
    )
    parser.add_argument("--yaml", metavar="DIR", required=True, type=Path, help="target folder")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if DIR is out of date"
    )
    args = parser.parse_args(argv)
    stale: list[str] = []
    for name, text in yaml_documents().items():
        path = args.yaml / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(path)
    if stale:
        print("out of date (run python -m proto.api.crds --yaml DIR):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
