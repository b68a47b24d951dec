"""The HTTP front of the emulator: routing, authentication, metrics and faults.

One catch-all route parses the path the way kube-apiserver's handler chain does
(``/api/v1/...``, ``/apis/<group>/<version>/...``, the legacy ``/watch/`` prefix, namespaced
and cluster-scoped paths, subresources), checks the bearer token (or, in RBAC mode,
authenticates and authorizes the request: ``access.py``), applies injected faults,
dispatches to ``Handlers`` and counts the request in ``apiserver_request_total``. Unknown
resources under ``/api/v1`` get a JSON 404; unknown groups, versions or paths under
``/apis`` get the plain-text ``404 page not found``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from loadtest.apiserver import discovery, errors, openapi, tables
from loadtest.apiserver.faults import AdminHandler, Faults
from loadtest.apiserver.handlers import Handlers, error_response, json_response
from loadtest.apiserver.metrics import Metrics
from loadtest.apiserver.registry import Registry, ResourceType
from proto.runtime.logs import get_logger

if TYPE_CHECKING:
    from loadtest.apiserver.access import Access

_log = get_logger(__name__)
HEALTH = frozenset({"/healthz", "/livez", "/readyz"})
NOT_FOUND_TEXT = "404 page not found\n"


@dataclass(slots=True)
class Route:
    """What a resource request addresses; ``verb`` is kube-apiserver's metrics verb."""

    rt: ResourceType
    namespace: str
    name: str
    subresource: str
    watch: bool
    verb: str = ""

    @property
    def scope(self) -> str:
        if self.name:
            return "resource"
        return "namespace" if self.namespace else "cluster"


def _accepts_json(accept: str | None) -> bool:
    """Whether an Accept header lets the server answer plain JSON (the only form served)."""
    if not accept or accept == "application/json":
        return True
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if media.lower() in ("application/json", "*/*", "application/*") and not any(
            p.startswith(("as=", "g=", "v=")) for p in params
        ):
            return True
    return False


def _text_404() -> web.Response:
    return web.Response(status=404, text=NOT_FOUND_TEXT, content_type="text/plain", charset="utf-8")


class Router:
    def __init__(
        self,
        registry: Registry,
        handlers: Handlers,
        metrics: Metrics,
        faults: Faults,
        *,
        token: str | None,
        admin: dict[tuple[str, str], AdminHandler],
        host: str = "",
        access: Access | None = None,
    ) -> None:
        self.admin = admin
        self._routes: dict[str, tuple[int, tuple[ResourceType, str, str, str, bool] | None]] = {}
        self.registry = registry
        self.handlers = handlers
        self.metrics = metrics
        self.faults = faults
        self.token = token
        self.host = host
        self.access = access
        """RBAC mode (``access.py``): replaces the single-token check when set."""

    # --- entry point --------------------------------------------------------------------------

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if self.access is not None and path not in HEALTH:
            try:
                self.access.check(request)
            except errors.ApiError as err:
                self.metrics.request(verb=request.method, subresource=path, code=err.code)
                return error_response(err)
        elif self.token is not None and path not in HEALTH:
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.token}":
                self.metrics.request(verb=request.method, subresource=path, code=401)
                return error_response(errors.unauthorized())
        if path.startswith("/_emulator/"):
            admin = self.admin.get((request.method, path))
            return await admin(request) if admin else _text_404()
        if self.faults.latencies or self.faults.errors:
            early = await self._faults(request)
            if early is not None:
                self.metrics.request(verb=request.method, subresource=path, code=early.status)
                return early
        route = None
        response: web.StreamResponse
        try:
            if path in ("/api", "/apis") or path.startswith(("/api/", "/apis/")):
                route = self.resolve(request)
                if route is None:
                    response = await self._discovery(request)
                else:
                    response = await self._dispatch(request, route)
            else:
                response = await self._non_resource(request)
        except errors.PageNotFound:
            response = _text_404()
        except errors.ApiError as err:
            response = error_response(err)
        except web.HTTPException:
            raise
        except asyncio.CancelledError:
            # the client went away: a watch had its 200 out, other requests no status at all
            self._count(request, route, 200 if route is not None and route.verb == "WATCH" else 0)
            raise
        except Exception as err:  # a bug must cost one request, not the server
            _log.exception("request failed", method=request.method, path=path)
            response = error_response(errors.internal_error(f"{type(err).__name__}: {err}"))
        self._count(request, route, response.status)
        return response

    async def _faults(self, request: web.BaseRequest) -> web.StreamResponse | None:
        target = request.path_qs
        latency = self.faults.latency_for(request.method, target)
        if latency:
            await asyncio.sleep(latency)
        rule = self.faults.error_for(request.method, target)
        if rule is None:
            return None
        if rule.status == 429:
            return error_response(errors.too_many_requests(rule.retry_after))
        if rule.status == 500:
            return error_response(errors.internal_error("injected fault"))
        if rule.status == "timeout":
            waited = 0.0
            while rule.seconds is None or waited < rule.seconds:
                transport = request.transport
                if transport is None or transport.is_closing():
                    return web.Response(status=499)
                await asyncio.sleep(0.05)
                waited += 0.05
        return error_response(errors.timeout())

    def _count(self, request: web.BaseRequest, route: Route | None, code: int) -> None:
        if route is None:
            self.metrics.request(verb=request.method, subresource=request.path, code=code)
            return
        rt = route.rt
        self.metrics.request(
            verb=route.verb or request.method,
            group=rt.group,
            version=rt.version,
            resource=rt.plural,
            subresource=route.subresource,
            scope=route.scope,
            code=code,
        )

    # --- resolution ---------------------------------------------------------------------------

    def resolve(self, request: web.BaseRequest) -> Route | None:
        """The resource a request addresses; None for discovery paths (cached per path)."""
        path = request.path
        cached = self._routes.get(path)
        if cached is None or cached[0] != self.registry.generation:
            found = self._resolve(path)
            if len(self._routes) > 10_000:
                self._routes.clear()
            cached = self._routes[path] = (self.registry.generation, found)
        found = cached[1]
        return None if found is None else Route(*found)

    def _resolve(self, path: str) -> tuple[ResourceType, str, str, str, bool] | None:
        parts = [p for p in path.split("/") if p]
        core = parts[0] == "api"
        if core:
            if len(parts) == 1:
                return None
            if parts[1] != "v1":
                raise errors.PageNotFound()
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) <= 3:
                return None
            group, version, rest = parts[1], parts[2], parts[3:]
            if version not in self.registry.versions(group):
                raise errors.PageNotFound()
        if not rest:
            return None

        def missing() -> Exception:
            return errors.resource_not_found() if core else errors.PageNotFound()

        watch = False
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
            if not rest:
                raise missing()
        namespace = ""
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (core and len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        rt = self.registry.get(group, version, plural)
        if rt is None or len(rest) > 3:
            raise missing()
        if namespace and not rt.namespaced:
            raise missing()
        if rt.namespaced and name and not namespace:
            raise missing()
        if subresource and rt.subresource(subresource) is None:
            raise errors.resource_not_found()
        return rt, namespace, name, subresource, watch

    # --- dispatch -----------------------------------------------------------------------------

    async def _dispatch(self, request: web.BaseRequest, route: Route) -> web.StreamResponse:
        method = request.method
        rt, ns, name, sub = route.rt, route.namespace, route.name, route.subresource
        handlers = self.handlers
        watch = route.watch or request.query.get("watch", "").lower() in ("true", "1")
        if self.access is not None:
            served = await self.access.serve(request, rt, ns, name, sub)
            if served is not None:
                route.verb = method
                return served
        form = tables.negotiate(request.headers.get("Accept"))
        if form not in ("json", None) and method == "GET" and not sub:
            route.verb = "WATCH" if watch else "GET" if name else "LIST"
            return await handlers.table(request, rt, ns, name, form, watch=watch)
        if not _accepts_json(request.headers.get("Accept")):
            raise errors.not_acceptable()
        if sub == "scale" and rt.scale is not None:
            route.verb = {"GET": "GET", "PUT": "PUT", "PATCH": "PATCH"}.get(method, method)
            return await handlers.scale(request, rt, ns, name)
        if sub and sub not in ("status", "finalize"):
            route.verb = method
            raise errors.ApiError(
                405,
                "MethodNotAllowed",
                f"the embedded cluster does not serve the {rt.plural}/{sub} subresource",
                details={},
            )
        if method == "GET":
            if watch:
                route.verb = "WATCH"
                return await handlers.collection(request, rt, ns, name, True)
            if name and sub != "finalize":
                route.verb = "GET"
                return await handlers.get(request, rt, ns, name)
            if not name:
                route.verb = "LIST"
                return await handlers.collection(request, rt, ns, "", False)
        route.verb = {"DELETE": "DELETECOLLECTION" if not name else "DELETE"}.get(method, method)
        if method == "PATCH" and "apply-patch" in request.headers.get("Content-Type", ""):
            route.verb = "APPLY"
        if not name:
            if method == "POST":
                return await handlers.create(request, rt, ns)
            if method == "DELETE" and "deletecollection" in rt.verbs:
                return await handlers.delete_collection(request, rt, ns)
            raise errors.method_not_allowed()
        allowed = rt.subresource(sub).verbs if sub else rt.verbs  # type: ignore[union-attr]
        if method == "PUT" and "update" in allowed:
            return await handlers.update(request, rt, ns, name, sub)
        if method == "PATCH" and "patch" in allowed:
            return await handlers.patch(request, rt, ns, name, sub)
        if method == "DELETE" and not sub:
            return await handlers.delete(request, rt, ns, name)
        raise errors.method_not_allowed()

    # --- discovery and non-resource paths -----------------------------------------------------

    async def _discovery(self, request: web.BaseRequest) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if request.method != "GET":
            raise errors.method_not_allowed()
        if len(parts) == 1:
            return self._root(request, core=parts[0] == "api")
        if parts[0] == "api":
            return json_response(discovery.resource_list(self.registry, "", "v1"))
        group = parts[1]
        versions = self.registry.versions(group)
        if not versions:
            raise errors.PageNotFound()
        if len(parts) == 2:
            return json_response(discovery.api_group(self.registry, group))
        if parts[2] not in versions:
            raise errors.PageNotFound()
        return json_response(discovery.resource_list(self.registry, group, parts[2]))

    def _root(self, request: web.BaseRequest, *, core: bool) -> web.Response:
        """``/api`` (``core``) or ``/apis``: aggregated discovery when the client asks for it,
        else the legacy version or group list; 406 when it accepts neither."""
        form = discovery.negotiate(request.headers.get("Accept"))
        if form is None:
            raise errors.not_acceptable()
        if form == "aggregated":
            return self._aggregated(discovery.aggregated(self.registry, core=core))
        if core:
            return json_response(discovery.api_versions(self.host))
        return json_response(discovery.api_group_list(self.registry))

    @staticmethod
    def _aggregated(body: dict[str, Any]) -> web.Response:
        response = json_response(body)
        response.headers["Content-Type"] = discovery.AGGREGATED
        return response

    async def _non_resource(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if path in HEALTH:
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version":
            return json_response(discovery.version_info())
        if path == "/openapi/v3":
            return json_response(openapi.index(self.registry))
        if path.startswith("/openapi/v3/"):
            parts = path.split("/")[3:]
            group, version = (
                (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("", parts[-1])
            )
            doc = openapi.document(self.registry, group, version) if len(parts) in (2, 3) else None
            return json_response(doc) if doc is not None else _text_404()
        if path == "/metrics":
            return web.Response(
                text=self._metrics_text(), content_type="text/plain", charset="utf-8"
            )
        return _text_404()

    def _metrics_text(self) -> str:
        storage = self.handlers.objects.storage
        return self.metrics.render(
            lambda: {name.lstrip("/"): len(t.objects) for name, t in storage.tables.items()}
        )


MAX_BODY = 16 * 1024 * 1024


def http_server(router: Router) -> web.Server:
    """A low-level aiohttp server: one handler, no URL dispatcher or middlewares."""
    loop = asyncio.get_running_loop()

    def request(
        message: Any, payload: Any, protocol: Any, writer: Any, task: Any
    ) -> web.BaseRequest:
        return web.BaseRequest(
            message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY
        )

    return web.Server(
        router.handle, request_factory=request, handler_cancellation=True, access_log=None
    )
