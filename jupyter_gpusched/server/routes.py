"""The URL table of the gpusched API."""

from __future__ import annotations

from typing import Any

from jupyter_server.utils import url_path_join

from .base import UnknownPathHandler
from .handlers.budgets import UsageReportHandler
from .handlers.cluster import ClusterHandler, MeHandler, MetricsHandler, QueuesHandler, UsageHandler
from .handlers.forecast import ForecastHandler
from .handlers.health import HealthHandler
from .handlers.interactive import KernelActivityHandler, KernelKeepHandler, KernelRequestHandler, KernelUsageHandler
from .handlers.jobs import JobEventsHandler, JobHandler, JobLogHandler, JobOutputHandler, JobsHandler
from .handlers.notify import NotifySettingsHandler
from .handlers.pipelines import PipelineHandler, PipelinesHandler
from .handlers.scaling import ScalingHandler
from .handlers.schedules import (
    ScheduleHandler,
    ScheduleJobsHandler,
    SchedulePreviewHandler,
    SchedulesHandler,
)
from .handlers.upload import UploadHandler


def handlers(base_url: str) -> list[tuple[str, type]]:
    api = url_path_join(base_url, "gpusched", "api")
    # Job ids are 12 hex digits; the store holds up to 64 characters. A longer one is no job: the JSON 404.
    job = r"/jobs/(?P<job_id>[A-Za-z0-9_.\-]{1,64})"
    schedule = r"/schedules/(?P<schedule_id>[A-Za-z0-9_.\-]{1,64})"
    return [
        (api + "/jobs", JobsHandler),
        (api + job, JobHandler),
        (api + job + "/events", JobEventsHandler),
        (api + job + "/log", JobLogHandler),
        (api + job + "/output", JobOutputHandler),
        (api + "/pipelines", PipelinesHandler),
        (api + r"/pipelines/(?P<pipeline_id>[A-Za-z0-9_.\-]{1,64})", PipelineHandler),
        (api + "/schedules", SchedulesHandler),
        (api + "/schedules/preview", SchedulePreviewHandler),
        (api + schedule, ScheduleHandler),
        (api + schedule + "/jobs", ScheduleJobsHandler),
        (api + "/queues", QueuesHandler),
        (api + "/cluster", ClusterHandler),
        (api + "/usage", UsageHandler),
        (api + "/usage/report", UsageReportHandler),
        (api + "/me", MeHandler),
        (api + "/forecast", ForecastHandler),
        (api + "/scaling", ScalingHandler),
        (api + "/settings/notify", NotifySettingsHandler),
        (api + "/interactive", KernelUsageHandler),
        (api + r"/interactive/(?P<kernel_id>[A-Za-z0-9_.\-]{1,64})", KernelRequestHandler),
        (api + r"/interactive/(?P<kernel_id>[A-Za-z0-9_.\-]{1,64})/keep", KernelKeepHandler),
        (api + r"/interactive/(?P<kernel_id>[A-Za-z0-9_.\-]{1,64})/activity", KernelActivityHandler),
        (api + "/health", HealthHandler),
        (url_path_join(base_url, "gpusched", "metrics"), MetricsHandler),
        (api + "/internal" + job + "/upload/(?P<what>notebook|files/.+)", UploadHandler),
        (api + "(/.*)?", UnknownPathHandler),
    ]


# tornado closes, without a word, a connection whose request line and headers pass 64 KiB.
LONG_REQUEST_LINE_BYTES = 256 * 1024


def answer_long_request_lines(server: Any, limit: int = LONG_REQUEST_LINE_BYTES) -> None:
    """Let a request with a URI up to `limit` bytes reach the handlers, so an over-long one gets an
    answer (414 under the API) instead of a closed connection. `server`: the ServerApp once its
    HTTP server exists (the extension's start hook), or a tornado HTTPServer."""
    http_server = getattr(server, "http_server", server)  # ServerApp.http_server raises before it exists
    params = getattr(http_server, "conn_params", None)
    if params is not None and (params.max_header_size or 0) < limit:
        params.max_header_size = limit
