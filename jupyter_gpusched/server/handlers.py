"""Thin REST handlers: parse, validate, authorize, call the service, shape the JSON."""

from __future__ import annotations

import getpass
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ..core import JobState, SpecError
from ..service import JobNotFound, Service
from .metrics import render_metrics
from .validation import ApiError, parse_json_object, parse_submit, resolve_notebook

AUTH_RESOURCE = "gpusched"
STATES = {s.value for s in JobState}
DEFAULT_PAGE = 1000  # jobs per list response unless ?limit= says otherwise
MAX_PAGE = 10000


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def job_json(service: Service, job, detail: bool = False) -> dict[str, Any]:
    s = job.spec
    info = service.info.get(job.id, {})
    out: dict[str, Any] = {
        "id": job.id,
        "state": job.state.value,
        "notebook": s.notebook,
        "gpus": s.gpus,
        "priority": s.priority.label,
        "tenant": s.tenant,
        "owner": s.owner,
        "created": iso(job.submitted_at),
        "started": iso(job.first_started_at),
        "finished": iso(job.finished_at),
        "reason": job.reason,
        "preemptible": s.preemptible,
        "max_runtime": s.max_runtime,
        "allocation": [{"node": node, "gpus": list(ids)} for node, ids in job.allocation],
        "borrowed": job.borrowed,
        "attempts": job.attempts,
        "preemptions": job.preemptions,
        "progress": info.get("progress"),
        "message": info.get("message", ""),
    }
    if detail:
        out["parameters"] = dict(s.parameters)
        out["max_retries"] = s.max_retries
        out["gpu_type"] = s.gpu_type
        out["position"] = service.position(job) if job.state is JobState.QUEUED else None
        out["estimated_start"] = iso(service.estimated_start(job)) if job.state is JobState.QUEUED else None
    return out


class Identity:
    """Who is asking and what they may do; mixed into every gpusched handler.

    Single-user server: everyone holding its token is its owner and an admin (unless
    `admin_users` names someone). Multi-user (the JupyterHub service, `gpusched_multi_user`):
    the authenticated user owns their jobs; admins are the Hub's admins, members of
    `admin_groups` and `admin_users`; Hub groups map to tenants (`group_tenants`); notebooks
    are read from the user's own folder (`user_root_template`)."""

    @property
    def multi_user(self) -> bool:
        return bool(self.settings.get("gpusched_multi_user"))

    @property
    def hub_user(self) -> dict[str, Any]:
        """The Hub's model of the user (name, admin, groups), where a Hub authenticated the request."""
        return getattr(self.current_user, "hub_user", None) or {}

    @property
    def user_name(self) -> str:
        """Who is asking. On a single-user server everyone holding its token is its owner."""
        if self.multi_user or self.settings.get("gpusched_identity_usernames"):
            return self.current_user.username
        return self.settings.get("gpusched_owner") or getpass.getuser()

    @property
    def is_admin(self) -> bool:
        admins = self.settings.get("gpusched_admin_users") or set()
        if self.multi_user:
            hub = self.hub_user
            groups = set(hub.get("groups") or ())
            return bool(hub.get("admin")) or bool(groups & set(self.settings.get("gpusched_admin_groups") or ())) or (
                self.user_name in admins
            )
        return not admins or self.user_name in admins

    def user_tenants(self) -> list[str] | None:
        """Tenants this user may charge (the first is their default), or None: any (single-user)."""
        if not self.multi_user:
            return None
        groups = set(self.hub_user.get("groups") or ())
        out = [t for g, t in (self.settings.get("gpusched_group_tenants") or {}).items() if g in groups]
        fallback = self.service.tenant_for(self.user_name, None)
        return list(dict.fromkeys(out)) if out else [fallback]

    def check_tenant(self, requested: str | None) -> str | None:
        """The tenant a submission is charged to: the requested one if this user may use it."""
        allowed = self.user_tenants()
        if allowed is None:
            return requested
        if requested is None:
            return allowed[0]
        if requested not in allowed and not self.is_admin:
            raise ApiError(
                403, "forbidden", f"you may not submit to tenant {requested!r}; your tenants: {', '.join(allowed)}", "tenant"
            )
        return requested

    def notebook_root(self) -> Path:
        """The folder a submitted notebook path is resolved in (and may not leave)."""
        template = self.settings.get("gpusched_user_root") if self.multi_user else None
        if not template:
            return Path(self.settings["server_root_dir"])
        name = self.user_name
        if not name or name.startswith(".") or any(c in name for c in "/\\\0"):
            raise ApiError(403, "forbidden", f"user name {name!r} cannot name a folder for notebooks", "notebook")
        try:
            root = Path(template.format(username=name)).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            root = None
        if root is None or not root.is_absolute():
            raise ApiError(400, "not_found", f"user {name!r} has no notebook folder on the scheduler's machine", "notebook")
        return root

    def require_admin(self, what: str) -> None:
        if not self.is_admin:
            raise ApiError(403, "forbidden", f"{what} is for admins only", None)


class GPUSchedHandler(Identity, APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> Service:
        service = self.settings["gpusched_service"]
        service.start()  # idempotent; covers servers that never ran the extension's start hook
        return service

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error, ours or tornado's, as {"error", "message", "field"}."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            body = exc.body()
        elif isinstance(exc, web.HTTPError) and status_code == 403 and not exc.log_message and self._anonymous:
            body = {
                "error": "unauthenticated",
                "message": "not signed in: send a valid token (Authorization: token ...) or log in",
                "field": None,
            }
        elif isinstance(exc, web.HTTPError):
            body = {"error": _code(exc.status_code), "message": exc.log_message or self._reason, "field": None}
        else:
            body = {"error": "internal", "message": "internal server error; see the server log", "field": None}
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    @property
    def _anonymous(self) -> bool:
        return getattr(self, "_jupyter_current_user", None) is None

    def fail(self, error: ApiError) -> None:
        self.set_status(error.status)
        self.write_error(error.status, exc_info=(type(error), error, None))

    def _int_arg(self, name: str, default: int, low: int, high: int | None) -> int:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ApiError(400, "wrong_type", f"{name} must be a whole number", name) from None
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"between {low} and {high}"
            raise ApiError(400, "invalid_value", f"{name} must be {bound}", name)
        return value

    def job_or_404(self, job_id: str):
        try:
            job = self.service.get(job_id)
        except JobNotFound:
            raise ApiError(404, "not_found", f"no job {job_id!r}", "id") from None
        if not self.is_admin and job.spec.owner != self.user_name:
            raise ApiError(404, "not_found", f"no job {job_id!r}", "id")  # others' jobs do not exist for you
        return job


def _code(status: int) -> str:
    return {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict"}.get(
        status, "error"
    )


def api_errors(method):
    """Turn ApiError / SpecError raised by a handler method into the JSON error response."""

    async def wrapper(self, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except ApiError as err:
            self.fail(err)
        except SpecError as err:
            self.fail(ApiError(400, "invalid_value", err.message, err.field))

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class JobsHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        state = self.get_query_argument("state", None)
        if state is not None and state.upper() not in STATES:
            raise ApiError(400, "invalid_value", f"unknown state {state!r}; use one of {', '.join(sorted(STATES))}", "state")
        mine = self.get_query_argument("mine", "false").lower() in ("1", "true", "yes")
        owner = self.user_name if (mine or not self.is_admin) else None
        limit = self._int_arg("limit", DEFAULT_PAGE, 1, MAX_PAGE)
        offset = self._int_arg("offset", 0, 0, None)
        jobs = self.service.jobs(state=state.upper() if state else None, tenant=self.get_query_argument("tenant", None), owner=owner)
        page = jobs[offset : offset + limit]
        self.finish(
            {
                "jobs": [job_json(self.service, j) for j in page],
                "total": len(jobs),
                "next_offset": offset + limit if offset + limit < len(jobs) else None,
            }
        )


    @web.authenticated
    @authorized
    @api_errors
    async def post(self):
        args = parse_submit(parse_json_object(self.request.body))
        root = self.notebook_root()
        args["notebook"] = resolve_notebook(root, args["notebook"])
        if self.multi_user:  # the service has no single root: keep the full path in the user's folder
            args["notebook"] = str(root.resolve() / args["notebook"])
        args["tenant"] = self.check_tenant(args["tenant"])
        job = self.service.submit(owner=self.user_name, **args)
        self.set_status(201)
        self.set_header("Location", url_path_join(self.base_url, "gpusched/api/jobs", job.id))
        self.finish(job_json(self.service, job, detail=True))


class JobHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        self.finish(job_json(self.service, self.job_or_404(job_id), detail=True))

    @web.authenticated
    @authorized
    @api_errors
    async def delete(self, job_id: str):
        job = self.job_or_404(job_id)
        if job.state.terminal:
            raise ApiError(409, "conflict", f"job {job_id} already ended ({job.state.value}); nothing to cancel", "id")
        self.service.cancel(job_id, actor=self.user_name)
        self.finish(job_json(self.service, job, detail=True))


class JobEventsHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        self.job_or_404(job_id)
        events = [
            {"time": iso(e.time), "from": e.src.value if e.src else None, "to": e.dst.value, "reason": e.reason, "actor": e.actor}
            for e in self.service.events(job_id)
        ]
        self.finish({"events": events})


class JobLogHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        """The job's log as text. `?offset=N` returns only what follows byte N, so a client
        can follow a running job; the X-Log-Offset header gives the next offset."""
        self.job_or_404(job_id)
        try:
            offset = int(self.get_query_argument("offset", "0"))
        except ValueError:
            raise ApiError(400, "wrong_type", "offset must be a whole number of bytes", "offset") from None
        if offset < 0:
            raise ApiError(400, "invalid_value", "offset must be 0 or more", "offset")
        path = self.service.log_file(job_id)
        data = b""
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        self.set_header("X-Log-Offset", str(offset + len(data)))
        self.finish(data, set_content_type="text/plain; charset=utf-8")


class JobOutputHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        job = self.job_or_404(job_id)
        path = self.service.output_file(job_id)
        if not path.is_file():
            raise ApiError(
                409 if not job.state.terminal else 404,
                "not_ready" if not job.state.terminal else "not_found",
                f"job {job_id} has no executed notebook yet (it is {job.state.value})"
                if not job.state.terminal
                else f"job {job_id} ended ({job.state.value}) without an executed notebook",
                "id",
            )
        self.set_header("Content-Disposition", f'attachment; filename="{job_id}.ipynb"')
        with open(path, "rb") as f:
            self.finish(f.read(), set_content_type="application/x-ipynb+json")


class QueuesHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        self.finish({"policy": self.service.scheduler.policy.name, "queues": self.service.queues()})


class MeHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """Who the scheduler takes the caller for: name, admin, the tenants they may charge."""
        allowed = self.user_tenants()
        tenants = sorted(self.service.scheduler.ledger.tenants) if allowed is None else allowed
        default = allowed[0] if allowed else self.service.tenant_for(self.user_name, None)
        self.finish({"name": self.user_name, "admin": self.is_admin, "tenants": tenants, "default_tenant": default})


class UsageHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """Per-minute GPUs requested and allocated per tenant (what the forecaster learns from)."""
        minutes = self._int_arg("minutes", 24 * 60, 1, 60 * 24 * 90)
        usage = self.service.usage(minutes, self.get_query_argument("tenant", None))
        self.finish({"minutes": [iso(m) for m in usage["minutes"]], "tenants": usage["tenants"]})


class ClusterHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        cluster = self.service.cluster()
        if not self.is_admin:  # others' job ids are not yours to see
            mine = {j.id for j in self.service.jobs(owner=self.user_name)}
            for node in cluster["nodes"]:
                node["jobs"] = [j for j in node["jobs"] if j in mine]
        self.finish(cluster)


class MetricsHandler(GPUSchedHandler):
    """An API handler, so a scraper without a token gets 403, not a login page."""

    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        self.require_admin("/gpusched/metrics")
        from .scaling import recommendation, render_scaling_metrics  # here: scaling imports this module

        text = render_metrics(self.service)
        try:
            text += render_scaling_metrics(await recommendation(self.settings, self.service))
        except Exception:  # a failed forecast must not cost the scraper every other metric
            self.log.exception("gpusched: no pool-size recommendation for /gpusched/metrics")
        self.finish(text, set_content_type="text/plain; version=0.0.4; charset=utf-8")


class NotFoundHandler(GPUSchedHandler):
    """Unknown paths under the API get our JSON error too."""

    @api_errors
    async def prepare(self):
        raise ApiError(404, "not_found", f"no API endpoint at {self.request.path}")


def handlers(base_url: str) -> list[tuple[str, type]]:
    from .forecast import ForecastHandler  # here, not at the top: these subclass GPUSchedHandler
    from .scaling import ScalingHandler

    api = url_path_join(base_url, "gpusched", "api")
    job = r"/jobs/(?P<job_id>[A-Za-z0-9_.\-]+)"
    return [
        (api + "/jobs", JobsHandler),
        (api + job, JobHandler),
        (api + job + "/events", JobEventsHandler),
        (api + job + "/log", JobLogHandler),
        (api + job + "/output", JobOutputHandler),
        (api + "/queues", QueuesHandler),
        (api + "/cluster", ClusterHandler),
        (api + "/usage", UsageHandler),
        (api + "/me", MeHandler),
        (api + "/forecast", ForecastHandler),
        (api + "/scaling", ScalingHandler),
        (url_path_join(base_url, "gpusched", "metrics"), MetricsHandler),
        (api + "(/.*)?", NotFoundHandler),
    ]
