"""Command-line flags every metashard process takes: all of Metacontroller v4.17's, plus ours.

Contract:
- ``add_common(parser)`` adds every Metacontroller flag and metashard's shared ones, so that
  one argument list works for ``metashard coordinator``, ``metashard worker`` and ``metashard
  run`` alike (a Helm chart passes the same to both roles). Go's forms are accepted:
  ``--flag=value``, ``--flag value``, and for booleans ``--flag``/``--flag=true|false``;
  durations are Go durations (``20s``, ``30m``).
- ``common(args, role=...)`` resolves them into ``Common``: logging (``--log-level`` and
  ``--log-format`` win over ``--zap-log-level``, ``--zap-encoder`` and ``--zap-devel``), the
  API rate limit, the endpoints, and ``notices``: one warning line per flag given that has no
  effect in this role (or at all yet), for the entry point to log once logging is set up.
- ``--revision-history-limit N`` (>= 0, default 5; the workers act on it): childless
  ControllerRevisions kept per parent; a controller's ``metashard.io/revision-history-limit``
  annotation overrides it.
- ``--cluster-revision-namespace`` (every role; the coordinator and the workers must agree):
  where the ControllerRevisions of cluster-scoped parents live. Default: the namespace
  metashard runs in (``default_namespace``: ``$POD_NAMESPACE``, else the service-account
  namespace file, else ``default``).
- Values that can never work fail at parse time with argparse's exit code 2: an address that
  is not ``[HOST]:PORT`` (port 0-65535), ``0`` or ``unix:PATH``; an unknown level or
  encoder; a ``--target-label-selector`` that is not a label selector; an
  ``--apply-strategy`` other than ``dynamic-apply`` or ``server-side-apply``; an
  ``--apply-strategy-ssa-field-manager`` the API server would refuse (empty, longer than 128
  characters, or not printable ASCII); a resource lock other than ``leases``; negative rates.
- ``Common.apply`` is the apply strategy and SSA field manager the workers use; a
  coordinator, which writes no children, reports them as without effect.
- ``Parser`` reports a bad flag as one line (``<prog>: error: ... (see --help)``) and exit code
  2, not a usage dump; every ``metashard`` command parses with it. A value that is not a
  number is refused in argparse's words (``invalid int value: 'abc'``).

The mapping (Metacontroller's meaning -> metashard's behaviour) is tabled in the README.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

from proto.api.duration import parse_seconds
from proto.api.errors import DurationError
from proto.api.revisions import DEFAULT_HISTORY_LIMIT
from proto.api.selectors import SelectorError
from proto.api.selectors import parse as parse_selector
from proto.runtime.addresses import parse_address
from proto.runtime.logs import get_logger, parse_level

Role = Literal["coordinator", "worker", "run"]

DEFAULT_METRICS_ADDRESS = ":9999"  # Metacontroller's --metrics-address
DEFAULT_HEALTH_ADDRESS = ":8081"  # Metacontroller's --health-probe-bind-address
# Reconciles a worker process runs at once. Most of a reconcile is waiting (the snapshot, the
# hook, the writes), so a process runs many: with a hook that answers in 50 ms, 64 made the
# scale benchmark's cold start of 2,000 parents 1.7x faster than 16 (5.2 s against 9.0 s) and
# its update wave 2.4x faster, and without hook latency it was no slower and spent 10% less CPU
# per parent (docs/operations.md). 128 gained little more, at about 60 kB of worker memory
# per reconcile slot.
DEFAULT_CONCURRENCY = 64
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"

# zap's level names as controller-runtime's --zap-log-level takes them (pkg/log/zap/flags.go).
_ZAP_LEVELS = {"debug": "debug", "info": "info", "error": "error"}
_ZAP_STACK_LEVELS = ("info", "error", "panic")
_ZAP_TIME_ENCODINGS = ("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano")
_ISO_TIME_ENCODINGS = ("iso8601", "rfc3339", "rfc3339nano")
DYNAMIC_APPLY = "dynamic-apply"
SERVER_SIDE_APPLY = "server-side-apply"
APPLY_STRATEGIES = (DYNAMIC_APPLY, SERVER_SIDE_APPLY)
DEFAULT_SSA_FIELD_MANAGER = "metacontroller"  # Metacontroller's: objects keep their manager
_FIELD_MANAGER_MAX = 128  # the API server's limit on fieldManager


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def typed(fn: Callable[[str], object]) -> Callable[[str], object]:
    """Turn a ``ValueError`` of ``fn`` into argparse's error for the flag."""

    def parse(text: str) -> object:
        try:
            return fn(text)
        except (ValueError, DurationError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = getattr(fn, "__name__", "value")
    return parse


def go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def add_go_bool(
    p: argparse.ArgumentParser,
    flag: str,
    *,
    default: bool,
    help: str | None = None,
    metavar: str | None = None,
) -> None:
    """Add a boolean flag as Go's ``flag`` package reads one: ``--flag`` alone is true,
    ``--flag=VALUE`` or ``--flag VALUE`` is ``go_bool(VALUE)``."""
    p.add_argument(
        flag,
        type=typed(go_bool),
        nargs="?",
        const=True,
        default=default,
        help=help,
        metavar=metavar,
    )


def zap_level(text: str) -> str:
    """``--zap-log-level`` -> our level: ``debug``/``info``/``error``, or an integer > 0
    (zap's custom verbosity -N, which is at or below debug: our ``debug``)."""
    if text.lower() in _ZAP_LEVELS:
        return _ZAP_LEVELS[text.lower()]
    if text.lstrip("+").isdigit() and int(text) > 0:
        return "debug"
    raise ValueError(f"invalid log level {text!r}: expected debug, info, error or an integer > 0")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def _address(text: str) -> str:
    parse_address(text)
    return text


def label_selector(text: str) -> str:
    """A label selector in kubectl's ``-l`` syntax, kept as given."""
    try:
        parse_selector(text)
    except SelectorError as e:
        raise ValueError(f"invalid label selector {text!r}: {e}") from None
    return text


def _apply_strategy(text: str) -> str:
    return _choice(*APPLY_STRATEGIES)(text)


def field_manager(text: str) -> str:
    """A ``fieldManager`` the API server accepts: 1-128 printable ASCII characters."""
    if not text:
        raise ValueError("a field manager must not be empty")
    if len(text) > _FIELD_MANAGER_MAX:
        raise ValueError(f"a field manager is at most {_FIELD_MANAGER_MAX} characters")
    if not all(" " <= c <= "~" for c in text):
        raise ValueError(f"{text!r}: a field manager is printable ASCII only")
    return text


def _resource_lock(text: str) -> str:
    if text != "leases":
        raise ValueError(f"{text!r}: only leases is supported (as in current client-go)")
    return text


def _number(kind: Callable[[str], float], text: str) -> float:
    """``kind(text)``; a value that is not a number is refused in argparse's words
    (``invalid int value: 'abc'``), not Python's."""
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"invalid {getattr(kind, '__name__', 'number')} value: {text!r}") from None


def _non_negative(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = _number(kind, text)
        if value < 0:
            raise ValueError(f"must not be negative, got {text}")
        return value

    return parse


def positive_int(text: str) -> int:
    value = int(_number(int, text))
    if value < 1:
        raise ValueError(f"must be at least 1, got {text}")
    return value


def dns_label(text: str) -> str:
    """A namespace name: an RFC 1123 DNS label (lower case alphanumerics and ``-``, at most
    63 characters, starting and ending alphanumeric)."""
    if not (
        0 < len(text) <= 63
        and text[0].isalnum()
        and text[-1].isalnum()
        and all(c.isdigit() or ("a" <= c <= "z") or c == "-" for c in text)
    ):
        raise ValueError(f"{text!r} is not a namespace name (an RFC 1123 DNS label)")
    return text


def default_namespace(
    environ: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    """The namespace this process runs in: ``$POD_NAMESPACE`` (the chart sets it from the
    downward API), else the service account's namespace file, else ``default``."""
    found = environ.get("POD_NAMESPACE", "").strip()
    if found:
        return found
    try:
        found = service_account.read_text().strip()
    except OSError:
        found = ""
    return found or DEFAULT_NAMESPACE


def duration(text: str) -> float:
    """A Go duration (``"30s"``) in seconds."""
    return parse_seconds(text)


def add_common(p: argparse.ArgumentParser) -> None:
    """Every flag all three commands accept (see the module docstring)."""
    p.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    p.add_argument(
        "--client-go-qps",
        dest="qps",
        type=typed(_non_negative(float)),
        default=0.0,
        help="API requests per second of this process; 0 = no client-side limit (default)",
    )
    p.add_argument(
        "--client-go-burst",
        dest="burst",
        type=typed(_non_negative(int)),
        default=0,
        help="API burst; 0 = twice --client-go-qps (default)",
    )
    p.add_argument(
        "--metrics-address",
        type=typed(_address),
        default=DEFAULT_METRICS_ADDRESS,
        help="serve /metrics here (default :9999, as Metacontroller); 0 disables",
    )
    p.add_argument(
        "--health-probe-bind-address",
        dest="health_address",
        type=typed(_address),
        default=DEFAULT_HEALTH_ADDRESS,
        help="serve /healthz and /readyz here (default :8081, as Metacontroller); 0 disables",
    )
    p.add_argument(
        "--concurrency",
        "--workers",
        dest="concurrency",
        type=typed(positive_int),
        help=f"reconciles a worker process runs at once (default {DEFAULT_CONCURRENCY}); "
        "--workers is Metacontroller's name",
    )
    p.add_argument(
        "--discovery-interval",
        type=typed(duration),
        help="how often unresolved controllers are retried (Go duration, default 30s)",
    )
    p.add_argument(
        "--cache-flush-interval",
        type=typed(duration),
        help="every parent is reconciled again this often, at low priority (default 30m)",
    )
    p.add_argument(
        "--target-label-selector",
        type=typed(label_selector),
        default="",
        help="run only the CompositeControllers and DecoratorControllers whose labels match "
        "(label selector syntax, as kubectl -l)",
    )
    p.add_argument(
        "--cluster-revision-namespace",
        type=typed(dns_label),
        help="namespace of the ControllerRevisions of cluster-scoped parents (default: the "
        "namespace metashard runs in: $POD_NAMESPACE, else the service account's, else "
        "default); give every process the same",
    )
    p.add_argument(
        "--revision-history-limit",
        type=typed(_non_negative(int)),
        metavar="N",
        help="ControllerRevisions without children kept per parent, newest first (default "
        f"{DEFAULT_HISTORY_LIMIT}); a controller's metashard.io/revision-history-limit "
        "annotation overrides it",
    )
    _add_leader_election(p)
    _add_logging(p)
    p.add_argument("--pprof-address", help="accepted for Metacontroller; no effect (no pprof)")
    p.add_argument("--events-qps", type=typed(_non_negative(float)), help="no effect yet")
    p.add_argument("--events-burst", type=typed(_non_negative(int)), help="no effect yet")
    p.add_argument(
        "--apply-strategy",
        type=typed(_apply_strategy),
        default=DYNAMIC_APPLY,
        help="how children and attachments are written: dynamic-apply (3-way merge, the "
        "default) or server-side-apply",
    )
    p.add_argument(
        "--apply-strategy-ssa-field-manager",
        type=typed(field_manager),
        help=f"field manager of server-side apply (default {DEFAULT_SSA_FIELD_MANAGER})",
    )


def _add_leader_election(p: argparse.ArgumentParser) -> None:
    add_go_bool(
        p,
        "--leader-election",
        default=False,
        help="hold a Lease; only the holder runs (several replicas may run)",
    )
    p.add_argument(
        "--leader-election-resource-lock", type=typed(_resource_lock), help="leases (only)"
    )
    p.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: this pod's, or the kubeconfig context's)",
    )
    p.add_argument(
        "--leader-election-id",
        help="name of the Lease (default: metashard, or metashard-<hash> with a "
        "--target-label-selector)",
    )
    for name, dest, default, what in (
        ("lease-duration", "lease_duration", "15s", "how long a Lease not renewed stays taken"),
        (
            "renew-deadline",
            "renew_deadline",
            "10s",
            "the leader gives up leading when it could not renew for this long",
        ),
        ("retry-period", "retry_period", "2s", "how often the Lease is renewed or tried"),
    ):
        p.add_argument(
            f"--leader-election-{name}",
            dest=dest,
            type=typed(duration),
            help=f"{what} (Go duration, default {default})",
        )


def _add_logging(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-format",
        type=typed(_choice("auto", "json", "console")),
        help="json: one object per line; console: readable; auto (default): console on a terminal",
    )
    p.add_argument("--log-level", type=typed(parse_level), help="debug, info, warning, error")
    p.add_argument("--zap-log-level", type=typed(zap_level), help="debug, info, error or N > 0")
    p.add_argument("--zap-encoder", type=typed(_choice("json", "console")))
    add_go_bool(p, "--zap-devel", default=False)
    p.add_argument("--zap-stacktrace-level", type=typed(_choice(*_ZAP_STACK_LEVELS)))
    p.add_argument("--zap-time-encoding", type=typed(_choice(*_ZAP_TIME_ENCODINGS)))


@dataclass(frozen=True, slots=True)
class ApplyStrategy:
    """How workers write children: ``strategy`` is one of ``APPLY_STRATEGIES``;
    ``field_manager`` is the server-side apply field manager."""

    strategy: str = DYNAMIC_APPLY
    field_manager: str = DEFAULT_SSA_FIELD_MANAGER

    @property
    def server_side(self) -> bool:
        return self.strategy == SERVER_SIDE_APPLY


DEFAULT_APPLY = ApplyStrategy()


@dataclass(frozen=True, slots=True)
class Common:
    """What the shared flags resolve to, for one role (``common``); each role's settings hold
    it as their ``common`` field. The defaults are the flags' (for settings built in code)."""

    kubeconfig: str | None = None
    qps: float = 0.0  # client-side API rate limit; 0 = none (rely on API priority and fairness)
    burst: int = 0
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    health_address: str = DEFAULT_HEALTH_ADDRESS
    log_format: str = "auto"
    log_level: str = "info"
    concurrency: int = DEFAULT_CONCURRENCY
    # ControllerRevisions of cluster-scoped parents
    cluster_revision_namespace: str = DEFAULT_NAMESPACE
    revision_history_limit: int = DEFAULT_HISTORY_LIMIT  # childless revisions kept per parent
    notices: tuple[str, ...] = ()
    apply: ApplyStrategy = DEFAULT_APPLY  # --apply-strategy, --apply-strategy-ssa-field-manager


_COORDINATOR_ONLY = (
    "target_label_selector",
    "discovery_interval",
    "cache_flush_interval",
    "leader_election",
    "leader_election_resource_lock",
    "leader_election_namespace",
    "leader_election_id",
    "lease_duration",
    "renew_deadline",
    "retry_period",
)


def _flag(dest: str) -> str:
    return {
        "lease_duration": "--leader-election-lease-duration",
        "renew_deadline": "--leader-election-renew-deadline",
        "retry_period": "--leader-election-retry-period",
        "concurrency": "--workers/--concurrency",
    }.get(dest, "--" + dest.replace("_", "-"))


def _notices(args: argparse.Namespace, role: Role) -> list[str]:
    out: list[str] = []
    if role == "worker":
        out += [
            f"{_flag(d)} has no effect on a worker (the coordinator acts on it)"
            for d in _COORDINATOR_ONLY
            if getattr(args, d) not in (None, False, "")
        ]
    if role == "coordinator" and args.concurrency is not None:
        out.append(f"{_flag('concurrency')} has no effect on a coordinator (workers reconcile)")
    if role == "coordinator" and args.revision_history_limit is not None:
        out.append(
            "--revision-history-limit has no effect on a coordinator (workers write revisions)"
        )
    if args.pprof_address not in (None, "", "0"):
        out.append("--pprof-address has no effect: metashard serves no pprof (a Go profiler)")
    for flag in ("events_qps", "events_burst"):
        if getattr(args, flag) is not None:
            out.append(
                f"{_flag(flag)} has no effect yet: repeats of one event within 10 s are "
                "dropped and later ones aggregated instead"
            )
    if args.zap_stacktrace_level is not None:
        out.append("--zap-stacktrace-level has no effect: tracebacks go with errors only")
    if args.zap_time_encoding not in (None, *_ISO_TIME_ENCODINGS):
        out.append("--zap-time-encoding has no effect: timestamps are ISO 8601 (UTC)")
    if role == "coordinator":
        if args.apply_strategy != DYNAMIC_APPLY:
            out.append("--apply-strategy has no effect on a coordinator (workers write children)")
        if args.apply_strategy_ssa_field_manager is not None:
            out.append(
                "--apply-strategy-ssa-field-manager has no effect on a coordinator "
                "(workers write children)"
            )
    elif args.apply_strategy_ssa_field_manager is not None and args.apply_strategy != (
        SERVER_SIDE_APPLY
    ):
        out.append(
            "--apply-strategy-ssa-field-manager has no effect: --apply-strategy is "
            f"{args.apply_strategy}, not {SERVER_SIDE_APPLY}"
        )
    return out


def common(
    args: argparse.Namespace, *, role: Role, environ: Mapping[str, str] | None = None
) -> Common:
    """Resolve the shared flags of ``add_common`` for ``role`` (defaults from ``environ``,
    ``os.environ`` when not given)."""
    fmt = args.log_format or args.zap_encoder or ("console" if args.zap_devel else "auto")
    level = args.log_level or args.zap_log_level or ("debug" if args.zap_devel else "info")
    return Common(
        kubeconfig=args.kubeconfig,
        qps=args.qps,
        burst=int(args.burst or (args.qps * 2 if args.qps else 0)),
        metrics_address=args.metrics_address,
        health_address=args.health_address,
        log_format=fmt,
        log_level=level,
        concurrency=args.concurrency or DEFAULT_CONCURRENCY,
        cluster_revision_namespace=args.cluster_revision_namespace
        or default_namespace(os.environ if environ is None else environ),
        revision_history_limit=_or_default(args.revision_history_limit, DEFAULT_HISTORY_LIMIT),
        notices=tuple(_notices(args, role)),
        apply=ApplyStrategy(
            args.apply_strategy,
            args.apply_strategy_ssa_field_manager or DEFAULT_SSA_FIELD_MANAGER,
        ),
    )


def _or_default(value: int | None, default: int) -> int:
    return default if value is None else value


def log_notices(notices: tuple[str, ...]) -> None:
    """Log each notice of ``common`` as a warning (after ``logs.configure``)."""
    log = get_logger("metashard.flags")
    for notice in notices:
        log.warning(notice)
