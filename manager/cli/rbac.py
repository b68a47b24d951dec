"""``metashard rbac``: print the least-privilege RBAC for a set of controllers.

Usage::

    metashard rbac [--kubeconfig FILE]                 # the controllers installed in the cluster
    metashard rbac PATH...                             # controllers in YAML/JSON files or folders
        [--related RESOURCE[.GROUP]]... | --no-related
        [--output manifests|values] [--name NAME] [--namespace NS]

- Without paths it lists the cluster's controllers of every kind (``manager.kinds``:
  CompositeControllers, DecoratorControllers) and resolves their resources through discovery
  (a resource the cluster does not serve is an error). With paths it reads every
  ``*.yaml``/``*.yml``/``*.json`` file (folders recursively, several documents per file,
  ``kind: List`` unwrapped), keeps the controllers of every kind, and takes each resource's
  group from its ``apiVersion`` as written.
- A controller with a customize hook names its related resources at run time, per parent:
  they cannot be read from the objects. The command refuses to guess: pass each with
  ``--related`` (``namespaces`` too when a rule uses a ``namespaceSelector``), or
  ``--no-related`` to grant none.
- ``--output manifests`` (default) prints a ClusterRole (``--name``, default ``metashard``) and
  the leader-election Role in ``--namespace``; ``--output values`` prints the chart values
  (``rbac.clusterRole.rules``) for ``helm install -f`` (the chart has its own Lease Role).

``manager.controllers.rbac`` computes the rules and documents every verb.

Failures are reported as in every ``metashard`` command (``proto.runtime.startup``): a bad
flag, a path that cannot be read or parsed, no usable kubeconfig, or a customize hook without
``--related``/``--no-related``: one ``metashard rbac: error: ...`` line, exit 2. Controllers
that cannot be turned into rules (a field missing, a resource the cluster does not serve):
one such line per controller, every one of them, nothing on stdout, exit 1; as for a cluster
that refuses or does not answer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml  # type: ignore[import-untyped]

from manager.controllers.rbac import (
    ControllerResources,
    GroupResource,
    RbacError,
    Resolve,
    Rule,
    by_api_version,
    by_discovery,
    cluster_role_rules,
    controller_resources,
    leader_election_rules,
)
from manager.kinds import registry
from proto.api import names
from proto.kube.client import Client
from proto.kube.config import load_config
from proto.kube.errors import ConfigError, KubeError, ResourceNotFound
from proto.kube.session import Session
from proto.runtime.flags import Parser
from proto.runtime.startup import EXIT_CONFIG, EXIT_FAILURE, StartupError, fail

PROG = "metashard rbac"
_SUFFIXES = (".yaml", ".yml", ".json")


def _documents(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(where, object)`` for every object in ``path`` (a file, or a folder of files).
    Raises ``StartupError`` for a path that cannot be read or parsed."""
    if not path.exists():
        raise StartupError(f"{path}: no such file or directory")
    files = sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES) if path.is_dir() else [path]
    for file in files:
        try:
            docs = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except OSError as err:
            raise StartupError(f"{file}: {err.strerror or err}") from None
        except yaml.YAMLError as err:
            raise StartupError(f"{file}: {err}") from None
        for doc in docs:
            if not isinstance(doc, Mapping):
                continue
            items = doc.get("items") if doc.get("kind") == "List" else [doc]
            for item in items or ():
                if isinstance(item, Mapping):
                    yield str(file), item


def controllers_from_files(paths: Sequence[Path]) -> list[Mapping[str, Any]]:
    """The controllers of every kind (``manager.kinds``) in ``paths``; an empty result is an
    error."""
    kinds = [kind.kind.value for kind in registry()]
    found = [
        obj
        for path in paths
        for _, obj in _documents(path)
        if obj.get("apiVersion") == names.API_VERSION and obj.get("kind") in kinds
    ]
    if not found:
        raise StartupError(f"no {' or '.join(kinds)} in " + ", ".join(map(str, paths)))
    return found


async def controllers_from_cluster(
    kubeconfig: str | None,
) -> tuple[list[Mapping[str, Any]], Resolve]:
    """The cluster's controllers of every kind, and a resolver over its discovery."""
    async with Session(load_config(kubeconfig)) as session:
        client = Client(session)
        await client.discovery.refresh()
        found: list[Mapping[str, Any]] = []
        for plural in (kind.resource for kind in registry()):
            try:
                resource = await client.resource(names.API_VERSION, resource=plural)
            except ResourceNotFound:
                print(
                    f"{PROG}: warning: {plural} are not served (CRD not installed)",
                    file=sys.stderr,
                )
                continue
            found += (await client.list(resource)).items
        return found, by_discovery(client.discovery.resources)


def _write(
    documents: Sequence[Mapping[str, Any]], controllers: Sequence[ControllerResources], out: TextIO
) -> None:
    """The documents as YAML, under a comment naming the controllers they were computed for."""
    out.write(
        "# metashard rbac, for: " + (", ".join(map(str, controllers)) or "no controllers") + "\n"
    )
    out.write(yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=100))


def render(rules: list[Rule], *, output: str, name: str, namespace: str) -> list[dict[str, Any]]:
    """The YAML documents to print."""
    if output == "values":
        return [{"rbac": {"clusterRole": {"rules": [r.as_dict() for r in rules]}}}]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [r.as_dict() for r in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": f"{name}-leader-election", "namespace": namespace},
            "rules": [r.as_dict() for r in leader_election_rules()],
        },
    ]


def _group_resource(text: str) -> GroupResource:
    try:
        return GroupResource.parse(text)
    except RbacError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> Parser:
    p = Parser(
        prog=PROG,
        description="Print the least-privilege RBAC rules the given (or installed) Composite "
        "and Decorator controllers need.",
    )
    p.add_argument(
        "paths", nargs="*", type=Path, help="YAML/JSON files or folders (default: the cluster)"
    )
    p.add_argument(
        "--kubeconfig",
        help="read the controllers from this cluster (default: $KUBECONFIG, in-cluster, "
        "~/.kube/config)",
    )
    related = p.add_mutually_exclusive_group()
    related.add_argument(
        "--related",
        action="append",
        default=[],
        type=_group_resource,
        metavar="RESOURCE[.GROUP]",
        help="a resource customize hooks name (list, watch); repeat for each",
    )
    related.add_argument(
        "--no-related", action="store_true", help="customize hooks name no resources"
    )
    p.add_argument("--output", choices=("manifests", "values"), default="manifests")
    p.add_argument("--name", default="metashard", help="the ClusterRole's name (manifests)")
    p.add_argument(
        "--namespace", default="metashard", help="the leader-election Role's namespace (manifests)"
    )
    return p


def main(argv: Sequence[str], *, out: TextIO = sys.stdout) -> int:
    """Run the command; the exit code (see the module docstring), messages on stderr."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.paths and args.kubeconfig:
        parser.error("give PATHs or --kubeconfig, not both")
    resolve: Resolve
    try:
        if args.paths:
            objects, resolve = controllers_from_files(args.paths), by_api_version
        else:
            objects, resolve = asyncio.run(controllers_from_cluster(args.kubeconfig))
    except (StartupError, ConfigError) as err:
        return fail(PROG, err, code=EXIT_CONFIG)
    except KubeError as err:
        return fail(PROG, err)
    controllers: list[ControllerResources] = []
    broken: list[RbacError] = []
    for obj in objects:
        try:
            controllers.append(controller_resources(obj, resolve))
        except RbacError as err:
            broken.append(err)
    if broken:
        for problem in broken:
            fail(PROG, problem)
        return EXIT_FAILURE
    customizing = [str(c) for c in controllers if c.customize]
    if customizing and not (args.related or args.no_related):
        parser.error(
            "customize hooks name their related resources at run time ("
            + ", ".join(customizing)
            + "): pass each with --related RESOURCE[.GROUP], or --no-related"
        )
    rules = cluster_role_rules(controllers, related=args.related)
    documents = render(rules, output=args.output, name=args.name, namespace=args.namespace)
    _write(documents, controllers, out)
    return 0
