"""The URL table of the gpusched API."""

from __future__ import annotations

from jupyter_server.utils import url_path_join

from .handlers.cluster import ClusterHandler, MeHandler, MetricsHandler, NotFoundHandler, QueuesHandler, UsageHandler
from .handlers.forecast import ForecastHandler
from .handlers.jobs import JobEventsHandler, JobHandler, JobLogHandler, JobOutputHandler, JobsHandler
from .handlers.scaling import ScalingHandler


def handlers(base_url: str) -> list[tuple[str, type]]:
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
