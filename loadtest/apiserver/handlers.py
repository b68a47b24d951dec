"""The verbs of a resource endpoint: get, list, watch, create, update, patch, delete.

Each handler decodes the request the way kube-apiserver does (content types, JSON errors,
unknown fields per ``fieldValidation``, ``dryRun``, ``fieldManager``), calls ``Objects`` with
the write's field manager (server-side apply: ``applying``) and renders the result
(object bytes straight from storage where possible, ``Warning`` headers, Status bodies).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from loadtest.apiserver import (
    applying,
    decode,
    errors,
    fields,
    goyaml,
    ownership,
    protobuf,
    render,
    scale,
    tables,
)
from loadtest.apiserver.lifecycle import DeleteOptions, Objects, Written
from loadtest.apiserver.listing import ListOptions, list_page, needs_wait, parse_rv
from loadtest.apiserver.patch import PatchFailed, json_patch, merge_patch, strategic_merge
from loadtest.apiserver.registry import DecodeError, ResourceType
from loadtest.apiserver.storage import Change, Storage, Table, encode
from loadtest.apiserver.watch import WatchHub
from proto.api.validation import ErrorType, FieldError
from proto.runtime.clock import Clock

JSON = "application/json"
BODY_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
FUTURE_RV_WAIT = 3.0
PATCH_REJECTED = "the server rejected our request due to an error in our request"
Admission = Callable[
    [web.BaseRequest, ResourceType, str, dict[str, Any], Mapping[str, Any] | None], None
]
"""A check of a decoded write (request, resource, namespace, new object, stored object or
None on create) that raises ``errors.ApiError`` to refuse it (RBAC escalation checks)."""
_FIND_KIND = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
    'Kind string "json:\\"kind,omitempty\\"" }'
)


def json_response(
    body: dict[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON, headers=headers)


def error_response(err: errors.ApiError) -> web.Response:
    return json_response(err.status(), err.code, err.headers)


def protobuf_object(rt: ResourceType, raw: bytes, warnings: list[str]) -> dict[str, Any]:
    """The object of a protobuf body (``protobuf.decode``), its problems as API errors."""
    try:
        obj, skipped = protobuf.decode(raw)
    except protobuf.Unsupported as err:
        raise errors.ApiError(
            415,
            "UnsupportedMediaType",
            f"the embedded cluster decodes {protobuf.CONTENT_TYPE} only for the common built-in "
            f"types, not {err}; send application/json",
        ) from None
    except protobuf.ProtobufError as err:
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {rt.kind}): {err} "
            f"({decode.summarize(raw)})"
        ) from None
    warnings.extend(skipped)
    return obj


class RvWaiter:
    """Futures resolved when the store reaches a resourceVersion."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        storage.listen(self._changed)

    def _changed(self, table: Table, change: Change) -> None:
        if not self._waiting:
            return
        still = []
        for target, future in self._waiting:
            if future.done():
                continue
            if self._storage.rv >= target:
                future.set_result(None)
            else:
                still.append((target, future))
        self._waiting = still

    async def wait(self, target: int, clock: Clock, seconds: float) -> bool:
        if self._storage.rv >= target:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((target, future))
        timer = asyncio.ensure_future(clock.sleep(seconds))
        try:
            await asyncio.wait({future, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
        return future.done()


class Handlers:
    def __init__(self, objects: Objects, watches: WatchHub, clock: Clock) -> None:
        self.objects = objects
        self.watches = watches
        self.clock = clock
        self.waiter = RvWaiter(objects.storage)
        self.admission: Admission | None = None

    def _admit(
        self,
        request: web.BaseRequest,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: dict[str, Any],
    ) -> None:
        """Run ``admission`` on a decoded write (``name`` is the URL's, empty on create)."""
        if self.admission is not None:
            stored = self.objects.table(rt).get(namespace, name) if name else None
            self.admission(request, rt, namespace, obj, None if stored is None else stored.obj)

    # --- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _dry_run(request: web.BaseRequest, kind: str) -> bool:
        values = request.query.getall("dryRun", [])
        for value in values:
            if value != "All":
                raise errors.invalid_options(
                    kind,
                    [
                        FieldError(
                            ErrorType.NOT_SUPPORTED, "dryRun", 'supported values: "All"', value
                        )
                    ],
                )
        return bool(values)

    @staticmethod
    def _field_validation(request: web.BaseRequest) -> str:
        value = request.query.get("fieldValidation", "Warn") or "Warn"
        if value not in ("Ignore", "Warn", "Strict"):
            raise errors.bad_request(
                f'fieldValidation must be one of "Ignore", "Warn" or "Strict", got "{value}"'
            )
        return value

    def decode_object(
        self, rt: ResourceType, raw: bytes, content_type: str, validation: str, warnings: list[str]
    ) -> dict[str, Any]:
        # Like the API server's input negotiation: no Content-Type means its first media type.
        media = decode.media_type(content_type) or "application/json"
        if media == protobuf.CONTENT_TYPE:
            return self.check_object(rt, protobuf_object(rt, raw, warnings), validation, warnings)
        if media not in BODY_TYPES:
            raise errors.unsupported_media_type(BODY_TYPES)
        try:
            obj = goyaml.loads(raw) if media == "application/yaml" else decode.loads(raw)
        except decode.SyntaxProblem as err:
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get "
                f"version/kind; json parse error: {err} ({decode.summarize(raw)})"
            ) from None
        if not isinstance(obj, dict):
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get "
                f"version/kind; json parse error: json: cannot unmarshal {type(obj).__name__} "
                f"into Go value of type {_FIND_KIND} ({decode.summarize(raw)})"
            )
        return self.check_object(rt, obj, validation, warnings)

    @staticmethod
    def check_object(
        rt: ResourceType, obj: dict[str, Any], validation: str, warnings: list[str]
    ) -> dict[str, Any]:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )
        prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
        try:
            unknown = rt.behaviour.decode(obj)
        except DecodeError as err:
            raise errors.bad_request(f"{prefix}: {err}") from None
        if unknown and validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errors.bad_request(f"{prefix}: strict decoding error: {listed}")
        if validation == "Warn":
            warnings.extend(f'unknown field "{u}"' for u in unknown)
        return obj

    def render(
        self, rt: ResourceType, written: Written, status: int, warnings: list[str]
    ) -> web.Response:
        headers = (
            CIMultiDict(("Warning", f"299 - {orjson.dumps(w).decode()}") for w in warnings)
            if warnings
            else None
        )
        if written.status is not None:
            return json_response(written.status, status, headers)
        entry = written.entry
        if entry is not None and entry.obj is written.obj:
            body = render.object_bytes(rt, entry)
        else:
            body = encode(render.view_dict(rt, written.obj), rt.custom)
        return web.Response(body=body, status=status, content_type=JSON, headers=headers)

    async def _reach(self, target: int) -> None:
        """Wait (up to 3 s, as kube-apiserver) until the store reaches ``target``, else 504."""
        if not await self.waiter.wait(target, self.clock, FUTURE_RV_WAIT):
            raise errors.too_large_resource_version(target, self.objects.storage.rv)

    # --- read ---------------------------------------------------------------------------------

    async def get(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str
    ) -> web.StreamResponse:
        rv = request.query.get("resourceVersion", "")
        if rv not in ("", "0"):
            target = parse_rv(rv)
            if target > self.objects.storage.rv:
                await self._reach(target)
        entry = self.objects.get(rt, namespace, name)
        return web.Response(body=render.object_bytes(rt, entry), content_type=JSON)

    @staticmethod
    def _list_options(
        request: web.BaseRequest, rt: ResourceType, name: str, *, watch: bool
    ) -> ListOptions:
        """The list/watch options of a request; a name in the path is a field selector."""
        opts = ListOptions.parse(request.query, rt, watch=watch)
        if name:
            opts = dataclasses.replace(
                opts, field=(*opts.field, fields.Term("metadata.name", name, False))
            )
        return opts

    async def collection(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str, watch: bool
    ) -> web.StreamResponse:
        opts = self._list_options(request, rt, name, watch=watch)
        table = self.objects.table(rt)
        if opts.watch:
            return await self.watches.serve(request, rt, table, namespace, opts)
        target = needs_wait(self.objects.storage, opts)
        if target is not None:
            await self._reach(target)
        page = list_page(self.objects.storage, table, namespace, opts)
        return web.Response(body=render.list_bytes(rt, page.items, page.meta()), content_type=JSON)

    async def table(
        self,
        request: web.BaseRequest,
        rt: ResourceType,
        namespace: str,
        name: str,
        version: str,
        *,
        watch: bool = False,
    ) -> web.StreamResponse:
        """GET, LIST or WATCH answered as ``meta.k8s.io`` Tables (``tables``)."""
        include = tables.include_object(request.query)
        printer = self._printer(rt)
        if watch:
            opts = self._list_options(request, rt, name, watch=True)
            transform = tables.watch_transform(
                printer, version=version, include=include, now=time.time
            )
            table = self.objects.table(rt)
            return await self.watches.serve(
                request, rt, table, namespace, opts, transform=transform
            )
        if name:
            entries = [self.objects.get(rt, namespace, name)]
            meta = {"resourceVersion": entries[0].obj["metadata"].get("resourceVersion", "")}
        else:
            opts = ListOptions.parse(request.query, rt, watch=False)
            target = needs_wait(self.objects.storage, opts)
            if target is not None:
                await self._reach(target)
            page = list_page(self.objects.storage, self.objects.table(rt), namespace, opts)
            entries, meta = page.items, page.meta()
        body = tables.table(
            printer,
            (render.view_dict(rt, e.obj) for e in entries),
            version=version,
            include=include,
            now=time.time(),
            list_meta=meta,
        )
        return json_response(body)

    def _printer(self, rt: ResourceType) -> tables.Printer:
        if not rt.custom:
            return tables.builtin_printer(rt.group, rt.plural)
        crds = self.objects.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        crd = crds and self.objects.table(crds).get("", f"{rt.plural}.{rt.group}")
        versions = (crd.obj.get("spec") or {}).get("versions") or [] if crd else []
        served: dict[str, Any] = next((v for v in versions if v.get("name") == rt.version), {})
        return tables.crd_printer(served)

    # --- write --------------------------------------------------------------------------------

    async def _body(
        self, request: web.BaseRequest, rt: ResourceType, options: str
    ) -> tuple[dict[str, Any], bool, list[str]]:
        """The decoded object of a POST/PUT, whether it is a dry run, and its warnings."""
        dry_run = self._dry_run(request, options)
        validation = self._field_validation(request)
        warnings: list[str] = []
        content_type = request.headers.get("Content-Type", "")
        obj = self.decode_object(rt, await request.read(), content_type, validation, warnings)
        return obj, dry_run, warnings

    @staticmethod
    def owner(
        request: web.BaseRequest, options: str, subresource: str = "", *, apply: bool = False
    ) -> ownership.FieldOwner:
        """The write's manager: ``fieldManager`` (validated) or the User-Agent's product."""
        given = request.query.get("fieldManager")
        ownership.validate_field_manager(given, options=options, apply=apply)
        name = ownership.manager_name(given, request.headers.get("User-Agent", ""))
        return ownership.FieldOwner(name, subresource)

    async def create(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str
    ) -> web.StreamResponse:
        owner = self.owner(request, "CreateOptions")
        obj, dry_run, warnings = await self._body(request, rt, "CreateOptions")
        self._admit(request, rt, namespace, "", obj)
        written = self.objects.create(rt, namespace, obj, dry_run=dry_run, owner=owner)
        return self.render(rt, written, 201, warnings)

    async def update(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str, sub: str
    ) -> web.StreamResponse:
        owner = self.owner(request, "UpdateOptions", sub)
        obj, dry_run, warnings = await self._body(request, rt, "UpdateOptions")
        self._admit(request, rt, namespace, name, obj)
        written = self.objects.update(
            rt, namespace, name, obj, subresource=sub, dry_run=dry_run, owner=owner
        )
        return self.render(rt, written, 201 if written.created else 200, warnings)

    async def patch(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str, sub: str
    ) -> web.StreamResponse:
        media = decode.media_type(request.headers.get("Content-Type"))
        if media not in PATCH_TYPES:
            raise errors.ApiError(
                415, "UnsupportedMediaType", "415: Unsupported Media Type", details={}
            )
        if media == "application/apply-patch+yaml":
            return await self._apply(request, rt, namespace, name, sub)
        if media == "application/strategic-merge-patch+json" and rt.custom:
            raise errors.unsupported_media_type(
                (
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                )
            )
        owner = self.owner(request, "PatchOptions", sub)
        dry_run = self._dry_run(request, "PatchOptions")
        validation = self._field_validation(request)
        raw = await request.read()
        try:
            document = decode.loads(raw)
        except decode.SyntaxProblem as err:
            raise errors.bad_request(f"error decoding patch: {err}") from None
        current = self.objects.get(rt, namespace, name)
        target = render.mutable(rt, current)
        try:
            if media == "application/json-patch+json":
                if not isinstance(document, list):
                    raise errors.bad_request(
                        f"json: cannot unmarshal {type(document).__name__} into Go value of "
                        "type jsonpatch.Patch"
                    )
                patched = json_patch(target, document)
            elif not isinstance(document, dict):
                raise errors.bad_request("error decoding patch: the patch must be a JSON object")
            elif media == "application/merge-patch+json":
                patched = merge_patch(target, document)
            else:
                patched = strategic_merge(target, document, rt.kind)
        except PatchFailed:
            raise errors.ApiError(422, "Invalid", PATCH_REJECTED, details={}) from None
        if not isinstance(patched, dict):
            raise errors.ApiError(422, "Invalid", PATCH_REJECTED, details={})
        warnings: list[str] = []
        obj = self.check_object(rt, patched, validation, warnings)
        self._admit(request, rt, namespace, name, obj)
        written = self.objects.update(
            rt, namespace, name, obj, subresource=sub, dry_run=dry_run, owner=owner
        )
        return self.render(rt, written, 200, warnings)

    async def _apply(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str, sub: str
    ) -> web.StreamResponse:
        """Server-side apply (``loadtest.apiserver.applying``)."""
        owner = self.owner(request, "PatchOptions", sub, apply=True)
        dry_run = self._dry_run(request, "PatchOptions")
        validation = self._field_validation(request)
        force = applying.parse_force(request.query.get("force"))
        warnings: list[str] = []
        written = applying.apply(
            self.objects,
            rt,
            namespace,
            name,
            sub,
            raw=await request.read(),
            manager=owner.manager,
            force=force,
            dry_run=dry_run,
            check=lambda obj: self.check_object(rt, obj, validation, warnings),
            admit=lambda obj: self._admit(request, rt, namespace, name, obj),
        )
        return self.render(rt, written, 201 if written.created else 200, warnings)

    async def scale(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str
    ) -> web.StreamResponse:
        """GET, PUT or PATCH ``/scale``: an ``autoscaling/v1`` view of the replicas."""
        assert rt.scale is not None
        current = self.objects.get(rt, namespace, name)
        if request.method == "GET":
            return json_response(scale.view(current, rt.scale))
        if request.method not in ("PUT", "PATCH"):
            raise errors.method_not_allowed()
        raw = await request.read()
        try:
            document = decode.loads(raw)
        except decode.SyntaxProblem as err:
            raise errors.bad_request(f"error decoding patch: {err}") from None
        wanted = scale.view(current, rt.scale)
        if request.method == "PUT":
            wanted = document if isinstance(document, dict) else wanted
        else:
            media = decode.media_type(request.headers.get("Content-Type"))
            try:
                if media == "application/json-patch+json" and isinstance(document, list):
                    wanted = json_patch(wanted, document)
                elif isinstance(document, dict):
                    wanted = merge_patch(wanted, document)
            except PatchFailed:
                raise errors.ApiError(422, "Invalid", PATCH_REJECTED, details={}) from None
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            problem = FieldError(
                ErrorType.INVALID, "spec.replicas", "must be greater than or equal to 0", replicas
            )
            raise errors.invalid("Scale", "autoscaling", name, [problem])
        obj = scale.apply(current, wanted, rt.scale)
        self.objects.update(rt, namespace, name, obj)
        return json_response(scale.view(self.objects.get(rt, namespace, name), rt.scale))

    async def _delete_options(self, request: web.BaseRequest) -> DeleteOptions:
        query = request.query
        body: dict[str, Any] = {}
        raw = await request.read() if request.can_read_body else b""
        if raw.strip():
            protobuf_body = decode.media_type(request.headers.get("Content-Type")) == (
                protobuf.CONTENT_TYPE
            )
            try:
                loaded = protobuf.decode(raw)[0] if protobuf_body else decode.loads(raw)
            except (decode.SyntaxProblem, protobuf.ProtobufError) as err:
                raise errors.bad_request(f"error decoding DeleteOptions: {err}") from None
            body = loaded if isinstance(loaded, dict) else {}
        policy = body.get("propagationPolicy", query.get("propagationPolicy"))
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if isinstance(orphan, str):
            orphan = orphan.lower() == "true"
        problems = []
        if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
            problems.append(
                FieldError(
                    ErrorType.NOT_SUPPORTED,
                    "propagationPolicy",
                    'supported values: "Foreground", "Background", "Orphan", "nil"',
                    policy,
                )
            )
        if policy is not None and orphan is not None:
            problems.append(
                FieldError(
                    ErrorType.INVALID,
                    "propagationPolicy",
                    "orphanDependents and deletionPropagation cannot be both set",
                    policy,
                )
            )
        if problems:
            raise errors.invalid_options("DeleteOptions", problems)
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan else "Background"
        preconditions = body.get("preconditions") or {}
        given = body.get("dryRun") or query.getall("dryRun", None) or []
        dry_run = [str(d) for d in given]
        if any(d != "All" for d in dry_run):
            raise errors.invalid_options(
                "DeleteOptions",
                [
                    FieldError(
                        ErrorType.NOT_SUPPORTED, "dryRun", 'supported values: "All"', dry_run[0]
                    )
                ],
            )
        return DeleteOptions(
            policy=policy,
            uid=preconditions.get("uid"),
            resource_version=preconditions.get("resourceVersion"),
            dry_run=bool(dry_run),
        )

    async def delete(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str, name: str
    ) -> web.StreamResponse:
        options = await self._delete_options(request)
        return self.render(rt, self.objects.delete(rt, namespace, name, options), 200, [])

    async def delete_collection(
        self, request: web.BaseRequest, rt: ResourceType, namespace: str
    ) -> web.StreamResponse:
        options = await self._delete_options(request)
        opts = ListOptions.parse(request.query, rt, watch=False)
        table = self.objects.table(rt)
        deleted = []
        for entry in table.entries(namespace):
            if opts.matches(entry):
                written = self.objects.delete(rt, entry.namespace, entry.name, options)
                deleted.append(render.view_dict(rt, written.obj))
        body = {
            "kind": rt.list_kind_name,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.objects.storage.rv)},
            "items": deleted,
        }
        return json_response(body)
