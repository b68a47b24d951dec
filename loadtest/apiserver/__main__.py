"""``python -m loadtest.apiserver``: the embedded cluster as a process.

Prints its URL as the first line of stdout (flushed; ``--port 0`` picks a free port), then
where its kubeconfig is (``--kubeconfig PATH``, else a file in a temporary directory removed
on exit) and an ``export KUBECONFIG=...`` line to paste; stops cleanly on SIGTERM or SIGINT
(exit 0). ``--metacontroller-crds`` installs the ``metacontroller.k8s.io`` CRDs at start
(``metashard cluster`` passes it; ``--no-metacontroller-crds`` undoes it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys

from loadtest.apiserver import gcpauses
from loadtest.apiserver.cluster import EmbeddedCluster, Settings
from proto.api.crds import load_crds
from proto.runtime.flags import Parser
from proto.runtime.logs import configure, get_logger

DESCRIPTION = (
    "The embedded cluster: an in-memory Kubernetes API server, with the Metacontroller CRDs "
    "(metashard cluster installs them; --no-metacontroller-crds leaves them out). It prints "
    "its URL, then its kubeconfig and an export KUBECONFIG=... line to paste; Ctrl-C stops it."
)


def build_parser() -> Parser:
    """The parser of ``metashard cluster`` (run as ``python -m loadtest.apiserver``): its help
    and its errors name ``metashard cluster``, the command users type."""
    parser = Parser(prog="metashard cluster", description=DESCRIPTION)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free port)")
    parser.add_argument("--token", default=None, help="require this bearer token")
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig for the server here")
    parser.add_argument("--kubelet", action="store_true", help="mark pods Running and Ready")
    parser.add_argument(
        "--rbac",
        action="store_true",
        help="authorize requests with RBAC and accept ServiceAccount tokens from the "
        "TokenRequest API (the --token, or no credentials without one, stays cluster-admin)",
    )
    parser.add_argument(
        "--metacontroller-crds",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="install the metacontroller.k8s.io CRDs at start (metashard cluster: on)",
    )
    defaults = Settings()
    parser.add_argument(
        "--history-size",
        type=int,
        default=defaults.history_size,
        help="watch-cache capacity per resource",
    )
    parser.add_argument(
        "--bookmark-interval",
        type=float,
        default=defaults.bookmark_interval,
        help="seconds between watch bookmarks",
    )
    parser.add_argument(
        "--compaction-interval",
        type=float,
        default=defaults.compaction_interval,
        help="seconds between compactions of the resourceVersion history",
    )
    parser.add_argument("--log-level", default="warning", help="debug, info, warning or error")
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def banner(cluster: EmbeddedCluster, *, crds: bool) -> str:
    """What a person needs after the URL line: the kubeconfig and how to use it."""
    installed = "; Metacontroller CRDs installed" if crds else ""
    path = shlex.quote(str(cluster.kubeconfig.resolve()))
    return (
        f"# embedded cluster serving at {cluster.url}{installed}\n"
        f"# kubeconfig: {path} (Ctrl-C stops the cluster)\n"
        f"export KUBECONFIG={path}"
    )


async def serve(args: argparse.Namespace) -> None:
    settings = Settings(
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        compaction_interval=args.compaction_interval,
    )
    cluster = EmbeddedCluster(
        host=args.host,
        port=args.port,
        token=args.token,
        kubelet=args.kubelet,
        kubeconfig=args.kubeconfig,
        settings=settings,
        rbac=args.rbac,
        crds=load_crds() if args.metacontroller_crds else (),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await cluster.start()
    print(cluster.url, flush=True)
    print(banner(cluster, crds=args.metacontroller_crds), flush=True)
    get_logger(__name__).info(
        "embedded cluster serving", url=cluster.url, kubeconfig=str(cluster.kubeconfig)
    )
    await stop.wait()
    await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    configure(fmt="auto", level=args.log_level)
    gcpauses.install()
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
