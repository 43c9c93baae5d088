"""The one module that talks to the Kubernetes API (official client).

Objects travel as plain dicts: responses are read with `_preload_content=False` and parsed once
with json, which is several times faster than the client's model classes at thousands of pods,
and sidesteps the client's failure to deserialise a pods/binding response."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import structlog
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from scheduler.controller.runtime.admitted import ADMITTED

GROUP, VERSION, PLURAL = "rackwise.io", "v1alpha1", "trainingjobs"
QUEUES = "queues"  # rackwise.io/v1alpha1 Queue, cluster-scoped
API_VERSION = f"{GROUP}/{VERSION}"
PODGROUP_API = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")  # scheduler-plugins' PodGroup
WORKLOAD_PODGROUP_API = ("scheduling.k8s.io", "v1alpha2", "podgroups")  # the Workload API's
log = structlog.get_logger("rackwise")
Obj = dict[str, Any]
T = TypeVar("T")


class ApiError(RuntimeError):
    """A failed API call: the HTTP status (0 when no answer came) and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message

    @property
    def rejected(self) -> bool:
        """The server refused the request itself (invalid, forbidden, not found): sending it
        again unchanged will fail again."""
        return self.status in (400, 403, 404, 422)


def _message(status: int, body: bytes | str | None) -> str:
    """The `message` of a Kubernetes Status body, else the body's start."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    try:
        found = json.loads(text).get("message")
    except (ValueError, AttributeError):
        found = None
    return str(found or text or f"HTTP {status}")[:600]


Timeout = tuple[float, float]  # (connect, read) seconds


def _call(timeout: Timeout, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        response = fn(*args, _preload_content=False, _request_timeout=timeout, **kwargs)
    except ApiException as exc:
        raise ApiError(exc.status or 0, _message(exc.status or 0, exc.body)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ApiError(0, f"no answer from the API server: {exc.__class__.__name__}") from exc
    return json.loads(response.data) if response.data else {}


def _lines(response: Any) -> Iterator[bytes]:
    """A watch stream's newline-separated JSON events."""
    rest = b""
    for chunk in response.stream(64 * 1024, decode_content=True):
        rest += chunk
        *whole, rest = rest.split(b"\n")
        yield from (line for line in whole if line.strip())
    if rest.strip():
        yield rest


def _verb(method: str) -> str:
    """The HTTP-level verb of a generated client method (list_node -> list)."""
    head = method.split("_", 1)[0]
    return {"read": "get", "replace": "update"}.get(head, head)


class LeaseCalls:
    """The leader's Lease (coordination.k8s.io/v1), read and written through the gateway's
    calls: what leader election needs of the API server, apart from what the cycle needs."""

    coordination: Any

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError  # the gateway's: counted, with its timeouts

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        try:
            return dict(self._call(self.coordination.read_namespaced_lease, name, namespace))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create_lease(self, namespace: str, body: Obj) -> Obj:
        return dict(self._call(self.coordination.create_namespaced_lease, namespace, body))

    def replace_lease(self, namespace: str, name: str, body: Obj) -> Obj:
        """Optimistic: body carries the resourceVersion read, so a racing writer gets 409."""
        return dict(self._call(self.coordination.replace_namespaced_lease, name, namespace, body))


class Gateway(LeaseCalls):
    def __init__(
        self,
        kubeconfig: Path | None = None,
        pool_size: int = 32,
        timeout_s: float = 30.0,
        on_request: Callable[[str], None] | None = None,
    ) -> None:
        self.timeout: Timeout = (min(5.0, timeout_s), timeout_s)
        # told the verb of every request this gateway makes (the operator counts them)
        self.on_request = on_request or (lambda _verb: None)
        configuration = client.Configuration()
        if kubeconfig is not None:
            config.load_kube_config(str(kubeconfig), client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = pool_size
        if not configuration.verify_ssl:  # the loopback dev/test cluster only
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.coordination = client.CoordinationV1Api(self.api)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.on_request(_verb(fn.__name__))
        return _call(self.timeout, fn, *args, **kwargs)

    # reads
    def nodes(self) -> list[Obj]:
        return list(self._call(self.core.list_node)["items"])

    def pods(self) -> list[Obj]:
        return list(self._call(self.core.list_pod_for_all_namespaces)["items"])

    def jobs(self) -> list[Obj]:
        return list(
            self._call(self.custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)["items"]
        )

    def queues(self) -> list[Obj]:
        """The teams' Queues; none where the CRD is not installed (no quotas)."""
        try:
            return list(
                self._call(self.custom.list_cluster_custom_object, GROUP, VERSION, QUEUES)["items"]
            )
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise

    def patch_queue_status(self, name: str, status: Obj) -> None:
        patch = self.custom.patch_cluster_custom_object_status
        self._call(patch, GROUP, VERSION, QUEUES, name, {"status": status})

    def set_queue_finalizers(self, name: str, finalizers: list[str]) -> None:
        body = {"metadata": {"finalizers": finalizers}}
        self._call(self.custom.patch_cluster_custom_object, GROUP, VERSION, QUEUES, name, body)

    def podgroups(self, api: tuple[str, str, str] = PODGROUP_API) -> list[Obj]:
        """PodGroups of one kind (scheduler-plugins', else the Workload API's); none where that
        API is not served."""
        try:
            return list(self._call(self.custom.list_cluster_custom_object, *api)["items"])
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise

    def can_write(self, namespace: str) -> bool:
        """Whether this identity may bind pods in `namespace` (a SelfSubjectAccessReview: the
        one write every scheduled object needs)."""
        attributes = {"namespace": namespace, "verb": "create", "resource": "pods"}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes | {"subresource": "binding"}},
        }
        self.on_request("create")
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        response = self._raw("POST", path, json.dumps(review).encode(), self.timeout[1])
        if response.status >= 300:
            raise ApiError(response.status, _message(response.status, response.data))
        return bool(json.loads(response.data).get("status", {}).get("allowed"))

    # writes
    def create_pod(self, namespace: str, body: Obj) -> None:
        self._post(f"/api/v1/namespaces/{namespace}/pods", body)

    def bind(self, namespace: str, pod: str, node: str, queue: str = "") -> None:
        """`queue`: the team queue that admitted it, annotated through the Binding."""
        meta: Obj = {"name": pod, "namespace": namespace}
        if queue:
            meta["annotations"] = {ADMITTED: queue}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._post(f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", body)

    def _post(self, path: str, body: Obj) -> None:
        """The two calls made once per pod go straight to the client's connection pool: the
        generated API methods spend more CPU per request than the API server does, and a gang
        launch makes thousands of them."""
        self.on_request("create")
        response = self._raw("POST", path, json.dumps(body).encode(), self.timeout[1])
        if response.status >= 300:
            raise ApiError(response.status, _message(response.status, response.data))

    def _raw(
        self, method: str, path: str, body: bytes | None, read_s: float, stream: bool = False
    ) -> Any:
        configuration = self.api.configuration
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for setting in configuration.auth_settings().values():  # token auth, as the client does
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        try:
            return self.api.rest_client.pool_manager.request(
                method,
                configuration.host + path,
                body=body,
                headers=headers,
                preload_content=not stream,
                timeout=urllib3.Timeout(connect=self.timeout[0], read=read_s),
                retries=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, f"no answer from the API server: {exc.__class__.__name__}") from exc

    # the informer cache's reads (runtime/cache.py): raw JSON, no model objects
    def list_raw(self, path: str, keep: Callable[[Obj], T], page: int = 500) -> tuple[list[T], str]:
        """Every object at `path` (each passed through `keep`) and the list's resourceVersion,
        read `page` objects at a time (pages of one list share one snapshot), so a 100,000-pod
        list is never one body in memory."""
        items: list[T] = []
        token = ""
        while True:
            self.on_request("list")
            query = f"?limit={page}" + (f"&continue={quote(token)}" if token else "")
            response = self._raw("GET", path + query, None, self.timeout[1])
            if response.status >= 300:
                raise ApiError(response.status, _message(response.status, response.data))
            listed = json.loads(response.data)
            items.extend(keep(o) for o in listed.get("items") or [])
            meta = listed.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    def watch_raw(self, path: str, version: str, seconds: int) -> Iterator[tuple[str, Obj]]:
        """(type, object) from `version` on, bookmarks included, for at most `seconds`; a 410
        (the version is too old) is an ApiError with status 410."""
        self.on_request("watch")
        query = f"?watch=1&allowWatchBookmarks=true&timeoutSeconds={seconds}"
        response = self._raw(
            "GET", f"{path}{query}&resourceVersion={version}", None, seconds + 30, True
        )
        try:
            if response.status >= 300:
                raise ApiError(response.status, _message(response.status, response.read()))
            for line in _lines(response):
                event = json.loads(line)
                kind, obj = str(event.get("type")), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiError(int(obj.get("code") or 0), str(obj.get("message")))
                yield kind, obj
        finally:
            response.release_conn()

    def delete_pod(self, namespace: str, pod: str) -> None:
        try:
            self._call(self.core.delete_namespaced_pod, pod, namespace, grace_period_seconds=0)
        except ApiError as exc:
            if exc.status != 404:
                raise

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a TrainingJob (its TTL after finishing has passed); its pods go by owner."""
        try:
            self._call(
                self.custom.delete_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                propagation_policy="Background",
            )
        except ApiError as exc:
            if exc.status != 404:
                raise

    def ensure_service(self, namespace: str, body: Obj) -> None:
        try:
            self._call(self.core.create_namespaced_service, namespace, body)
        except ApiError as exc:
            if exc.status != 409:
                raise

    def patch_status(self, namespace: str, name: str, status: Obj) -> None:
        """Merge patch of .status: a key set to None is removed."""
        self._call(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"status": status},
        )

    def patch_podgroup_status(
        self, namespace: str, name: str, status: Obj, api: tuple[str, str, str] = PODGROUP_API
    ) -> None:
        """Merge patch of a PodGroup's .status (its conditions), of either kind."""
        self._call(
            self.custom.patch_namespaced_custom_object_status,
            *api[:2],
            namespace,
            api[2],
            name,
            {"status": status},
        )

    def create_event(self, namespace: str, body: Obj) -> str:
        """Create an Event; returns its name for later aggregation."""
        made = self._call(self.core.create_namespaced_event, namespace, body)
        return str(made["metadata"]["name"])

    def patch_event(self, namespace: str, name: str, patch: Obj) -> None:
        self._call(self.core.patch_namespaced_event, name, namespace, patch)

    def patch_pod_status(self, namespace: str, name: str, status: Obj) -> None:
        self._call(self.core.patch_namespaced_pod_status, name, namespace, {"status": status})


class AdminGateway(Gateway):
    """The calls only the dev tools and test fixtures make, with admin rights (nodes), never
    the operator."""

    def create_node(self, body: Obj) -> None:
        self._call(self.core.create_node, body)

    def delete_node(self, name: str) -> None:
        self._call(self.core.delete_node, name)

    def patch_node(self, name: str, patch: Obj) -> None:
        self._call(self.core.patch_node, name, patch)

    def patch_node_status(self, name: str, status: Obj) -> None:
        self._call(self.core.patch_node_status, name, {"status": status})
