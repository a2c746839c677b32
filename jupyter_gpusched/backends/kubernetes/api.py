"""The Kubernetes API: a thin JSON client, its error, and how the API server has been answering.

Dicts in, dicts out: no model objects (deserialising thousands of V1Job objects would cost more than the API
server does). `KubeApiError` is named so it is never confused with the REST API's own `ApiError`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import BackendError
from .config import KubernetesConfig

log = logging.getLogger(__name__)


class KubeApiError(Exception):
    """An API request that failed. `status` 0: no HTTP answer (connection refused, timeout)."""

    def __init__(self, status: int, message: str, reason: str = "", retry_after: float | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.retry_after = retry_after
        self.body = body

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status in (409, 429) or self.status >= 500

    @property
    def gone(self) -> bool:
        return self.status == 410


def _status_message(data: Any, fallback: str) -> tuple[str, str]:
    if isinstance(data, Mapping):
        return str(data.get("message") or fallback), str(data.get("reason") or "")
    return fallback, ""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jupyter-gpusched")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "dev"


# What the backend's requests carry as User-Agent, so an API server's audit log tells them from other clients'.
USER_AGENT = f"jupyter-gpusched/{_version()} (kubernetes backend)"


class Api:
    """A thin JSON client over the official client's ApiClient: dicts in, dicts out, no model objects
    (deserialising thousands of V1Job objects would cost more than the API server does)."""

    def __init__(self, cfg: KubernetesConfig, pool_size: int = 16, user_agent: str = USER_AGENT):
        try:
            from kubernetes import client, config
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendError(
                "the kubernetes backend needs the 'kubernetes' package: pip install 'jupyter-gpusched[k8s]'"
            ) from exc
        c = client.Configuration()
        try:
            in_cluster = cfg.in_cluster or (
                not cfg.kubeconfig
                and "KUBECONFIG" not in os.environ
                and not Path("~/.kube/config").expanduser().exists()
                and "KUBERNETES_SERVICE_HOST" in os.environ
            )
            if in_cluster:
                config.load_incluster_config(client_configuration=c)
            else:
                config.load_kube_config(
                    config_file=cfg.kubeconfig or None, context=cfg.context or None, client_configuration=c
                )
        except Exception as exc:
            raise BackendError(f"cannot load the Kubernetes configuration: {exc}") from None
        c.retries = False  # we retry, with backoff, ourselves
        c.connection_pool_maxsize = pool_size
        self.host = c.host
        self.client = client.ApiClient(c)
        self.client.user_agent = user_agent
        self.timeout = cfg.request_timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
    ) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        q = [(k, v if not isinstance(v, bool) else str(v).lower()) for k, v in (query or {}).items() if v is not None]
        t = timeout if timeout is not None else (min(3.0, self.timeout), self.timeout)
        try:
            resp = self.client.call_api(
                path,
                method,
                query_params=q,
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=t,
            )
        except ApiException as exc:
            try:
                data = json.loads(exc.body) if exc.body else None
            except (TypeError, ValueError):
                data = None
            message, reason = _status_message(data, f"{exc.status} {exc.reason}")
            retry = None
            if exc.headers and exc.headers.get("Retry-After"):
                try:
                    retry = float(exc.headers["Retry-After"])
                except ValueError:
                    retry = None
            raise KubeApiError(int(exc.status or 0), message, reason, retry, data) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise KubeApiError(
                0, f"cannot reach the Kubernetes API server at {self.host}: {type(exc).__name__}: {exc}"
            ) from None
        if stream:
            return resp
        try:
            return json.loads(resp.data) if resp.data else {}
        except ValueError as exc:
            raise KubeApiError(0, f"unreadable answer from the Kubernetes API server: {exc}") from None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # pragma: no cover
            pass


class Connection:
    """The client (made on first use, so a backend that is never started never needs a cluster) and the
    health of the API server as the watchers and workers see it."""

    def __init__(self, cfg: KubernetesConfig, api: Api | None = None):
        self.cfg = cfg
        self._api = api
        self.up = False
        self.error = ""
        self.down_since: float | None = None
        self.stats = {"creates": 0, "patches": 0, "deletes": 0, "retries": 0, "api_errors": 0}

    @property
    def api(self) -> Api:
        if self._api is None:
            size = self.cfg.workers + self.cfg.log_workers + 2 * len(self.cfg.namespaces()) + 4
            self._api = Api(self.cfg, pool_size=size)
        return self._api

    def request(self, method: str, path: str, **kw: Any) -> Any:
        return self.api.request(method, path, **kw)

    def ok(self) -> None:
        if not self.up:
            if self.down_since is not None:
                log.warning("the Kubernetes API server is reachable again after %.0f s", time.time() - self.down_since)
            self.up = True
            self.down_since = None
            self.error = ""

    def failed(self, exc: KubeApiError) -> None:
        self.stats["api_errors"] += 1
        if exc.status == 0:
            if self.up or self.down_since is None:
                log.warning("Kubernetes API server unreachable: %s (retrying)", exc.message)
                self.down_since = time.time()
            self.up = False
        self.error = exc.message

    def close(self) -> None:
        if self._api is not None:
            self._api.close()


def rejection(exc: KubeApiError, body: Mapping | None) -> str:
    """One readable line: what the API server refused, and its own words why."""
    kind = (body or {}).get("kind", "object")
    return f"the Kubernetes API server rejected the {kind} ({exc.status} {exc.reason or 'error'}): {exc.message}"
