"""ipywidgets for notebooks and Voila dashboards, over the one client.

from jupyter_gpusched.widgets import SubmitForm, QueueView, ForecastChart
SubmitForm("train.ipynb")      # a form; submits through the REST API
QueueView(refresh=5)           # a job table that refreshes itself
ScheduleView()                 # my recurring schedules, each with Pause / Resume
ForecastChart()                # demand history (and the forecast band when the server has one)
Plot().show(fig)               # a matplotlib figure as an image, its titles as its alt text
"""

from __future__ import annotations

import base64
import html
import io
import threading
from datetime import datetime
from typing import Any

import ipywidgets as w

from ..client import Client, GPUSchedError
from ..core.spec_fields import DEFAULT_PRIORITY, PRIORITY_CHOICES
from ..params import parse_lines

__all__ = [
    "ForecastChart",
    "PipelineForm",
    "QueueView",
    "ScheduleView",
    "SubmitForm",
    "Plot",
    "TEXT_COLORS",
    "error_html",
]

# Text colours readable on the page (WCAG AA, 4.5:1): the lab extension's theme-aware variables
# (labextension/style/base.css) where it is loaded, else shades readable on white (a Voila page).
TEXT_COLORS = {
    "ok": "var(--jp-gpusched-ok-text, #2e7d32)",
    "warn": "var(--jp-gpusched-warn-text, #a64d00)",
    "error": "var(--jp-gpusched-error-text, #c62828)",
    "brand": "var(--jp-gpusched-brand-text, #1565c0)",
    "muted": "var(--jp-gpusched-muted-text, #616161)",
}
STATE_COLORS = {
    "WAITING": TEXT_COLORS["muted"],  # for its dependencies (docs/pipelines.md)
    "QUEUED": TEXT_COLORS["muted"],
    "ADMITTED": TEXT_COLORS["brand"],
    "RUNNING": TEXT_COLORS["brand"],
    "SUCCEEDED": TEXT_COLORS["ok"],
    "FAILED": TEXT_COLORS["error"],
    "CANCELLED": TEXT_COLORS["muted"],
    "PREEMPTED": TEXT_COLORS["warn"],
    "LOST": TEXT_COLORS["warn"],
}


def error_html(message: str) -> str:
    """`message` as an error line."""
    return f'<span style="color:{TEXT_COLORS["error"]}">{html.escape(message)}</span>'


def figure_summary(fig: Any) -> str:
    """A plot's text alternative: each axes' title, or the text an empty one shows instead."""
    parts = [ax.get_title() or "; ".join(t.get_text() for t in ax.texts) for ax in fig.axes]
    return "Chart: " + ". ".join(p.replace("\n", " ") for p in parts if p)


class Plot(w.HTML):
    """A matplotlib figure as a PNG image with a text alternative (its `alt`, from the figure's titles:
    `figure_summary`). ipywidgets' Image has no alt text, and its tooltip breaks the view (8.1: it reads
    the description an Image lacks)."""

    png: bytes = b""

    def show(self, fig: Any) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        self.png = buf.getvalue()
        src = base64.b64encode(self.png).decode()
        alt = html.escape(figure_summary(fig))
        self.value = f'<img class="gpusched-plot" src="data:image/png;base64,{src}" alt="{alt}" style="max-width:100%">'


class _UsesClient:
    """The widget's client: the one given, else one made from the environment on first use."""

    _client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client


class SubmitForm(_UsesClient, w.VBox):
    """A form that queues a notebook as a GPU job and says what happened."""

    def __init__(self, notebook: str = "", client: Client | None = None, **kwargs):
        self._client = client
        self.notebook = w.Text(value=notebook, description="Notebook", placeholder="path/to/notebook.ipynb")
        self.gpus = w.BoundedIntText(value=1, min=1, max=1024, description="GPUs")
        self.priority = w.Dropdown(options=list(PRIORITY_CHOICES), value=DEFAULT_PRIORITY, description="Priority")
        self.tenant = w.Text(value="", description="Tenant", placeholder="(yours)")
        self.max_runtime = w.FloatText(value=0.0, description="Max runtime (s)", style={"description_width": "initial"})
        self.preemptible = w.Checkbox(value=False, description="Spot OK (preemptible)")
        self.parameters = w.Textarea(value="", description="Parameters", placeholder="lr=0.1\nepochs=3")
        wide = {"description_width": "initial"}
        self.after = w.Text(value="", description="Run after (job ids)", placeholder="none", style=wide)
        self.notify = w.Text(value="", description="Notify me", placeholder="(my defaults); none: none", style=wide)
        self.submit_button = w.Button(description="Submit GPU job", button_style="primary", icon="play")
        self.status = w.HTML(value="")
        self.last_job: dict[str, Any] | None = None
        self.submit_button.on_click(lambda _: self.submit())
        super().__init__(
            [
                self.notebook,
                self.gpus,
                self.priority,
                self.tenant,
                self.max_runtime,
                self.preemptible,
                self.parameters,
                self.after,
                self.notify,
                self.submit_button,
                self.status,
            ],
            **kwargs,
        )

    def submit(self) -> dict[str, Any] | None:
        try:
            job = self.client.submit(
                self.notebook.value,
                gpus=self.gpus.value,
                priority=self.priority.value,
                tenant=self.tenant.value.strip() or None,
                max_runtime=self.max_runtime.value or None,
                preemptible=self.preemptible.value,
                parameters=parse_lines(self.parameters.value),
                after=_listed(self.after.value) or None,
                notify=_notify_targets(self.notify.value),
            )
        except (GPUSchedError, ValueError) as exc:
            self.status.value = error_html(str(exc))
            return None
        self.last_job = job
        place = f", position {job['position'] + 1}" if job.get("position") is not None else ""
        self.status.value = f"Submitted <code>{job['id']}</code>: {job['state']}{place}"
        return job


def _listed(text: str) -> list[str]:
    """Comma- or space-separated words, as typed in a one-line field."""
    return [part for part in text.replace(",", " ").split() if part]


def _notify_targets(text: str) -> list[str] | None:
    """The form's notify field as the CLI's `--notify` reads it: empty, my defaults (None); `none`, none."""
    targets = _listed(text)
    if not targets:
        return None
    return [] if [t.lower() for t in targets] == ["none"] else targets


class PipelineForm(_UsesClient, w.VBox):
    """Run a pipeline file (YAML or JSON: `steps` and `edges`, docs/pipelines.md) and follow its steps."""

    def __init__(self, path: str = "", client: Client | None = None, **kwargs):
        self._client = client
        self.path = w.Text(
            value=path, description="Pipeline file", placeholder="flow.yaml", style={"description_width": "initial"}
        )
        self.run_button = w.Button(description="Run pipeline", button_style="primary", icon="play")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.status = w.HTML(value="")
        self.steps = w.HTML(value="")
        self.pipeline: dict[str, Any] | None = None
        self.run_button.on_click(lambda _: self.run())
        self.refresh_button.on_click(lambda _: self.refresh_now())
        super().__init__([self.path, w.HBox([self.run_button, self.refresh_button]), self.status, self.steps], **kwargs)

    def run(self) -> dict[str, Any] | None:
        try:
            self.pipeline = self.client.run_pipeline_file(self.path.value)
        except (GPUSchedError, ValueError, OSError) as exc:
            self.status.value = error_html(str(exc))
            return None
        self.status.value = f"Pipeline <code>{html.escape(self.pipeline['id'])}</code> submitted"
        self._show(self.pipeline)
        return self.pipeline

    def refresh_now(self) -> None:
        if self.pipeline is not None:
            self.pipeline = self.client.pipeline(self.pipeline["id"])
            self._show(self.pipeline)

    def _show(self, pipeline: dict[str, Any]) -> None:
        rows = "".join(
            f"<tr><td>{i}</td><td>{html.escape(str(step.get('notebook', '')))}</td>"
            f"<td>{html.escape(str(step.get('state', '')))}</td><td><code>{html.escape(str(step.get('id', '')))}</code></td></tr>"
            for i, step in enumerate(pipeline.get("steps", []))
        )
        state = html.escape(str(pipeline.get("state", "")))
        self.steps.value = (
            f"<b>{state}</b><table><tr><th>#</th><th>notebook</th><th>state</th><th>job</th></tr>{rows}</table>"
        )


class QueueView(_UsesClient, w.VBox):
    """A table of jobs that refreshes every `refresh` seconds (0: only on `refresh_now`)."""

    def __init__(self, client: Client | None = None, refresh: float = 5.0, mine: bool = False, **kwargs):
        self._client = client
        self.mine = mine
        self.table = w.HTML(value="")
        self.summary = w.HTML(value="")
        self.jobs: list[dict[str, Any]] = []
        self._stop = threading.Event()
        super().__init__([self.summary, self.table], **kwargs)
        self.refresh_now()
        if refresh > 0:
            threading.Thread(target=self._loop, args=(refresh,), daemon=True).start()

    def _loop(self, every: float) -> None:
        while not self._stop.wait(every):
            self.refresh_now()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        super().close()

    def refresh_now(self) -> None:
        try:
            self.jobs = self.client.jobs(mine=self.mine)
            cluster = self.client.cluster()
        except GPUSchedError as exc:
            self.summary.value = error_html(str(exc))
            return
        running = sum(j["state"] == "RUNNING" for j in self.jobs)
        queued = sum(j["state"] == "QUEUED" for j in self.jobs)
        self.summary.value = (
            f"<b>{running}</b> running, <b>{queued}</b> queued &middot; "
            f"<b>{cluster['free_gpus']}</b> of {cluster['total_gpus']} GPUs free &middot; {cluster['policy']} policy"
        )
        rows = []
        for j in self.jobs:
            color = STATE_COLORS.get(j["state"], "inherit")
            progress = f"{j['progress'][0]}/{j['progress'][1]}" if j.get("progress") else ""
            rows.append(
                "<tr>"
                f"<td><code>{html.escape(j['id'])}</code></td>"
                f'<td style="color:{color};font-weight:bold">{j["state"]}</td>'
                f"<td>{html.escape(j['notebook'])}</td><td>{j['gpus']}</td><td>{j['priority']}</td>"
                f"<td>{html.escape(j['tenant'])}</td><td>{progress}</td><td>{html.escape(j.get('message') or j.get('reason') or '')}</td>"
                "</tr>"
            )
        head = "".join(
            f"<th>{h}</th>" for h in ("ID", "State", "Notebook", "GPUs", "Priority", "Tenant", "Cells", "Note")
        )
        self.table.value = (
            f'<table class="gpusched-jobs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        )


class ScheduleView(_UsesClient, w.VBox):
    """The caller's recurring schedules (docs/schedules.md): what runs when, the last run, and a
    Pause / Resume button each. `refresh_now` reads them again."""

    def __init__(self, client: Client | None = None, **kwargs):
        self._client = client
        self.status = w.HTML(value="")
        self.rows = w.VBox([])
        self.schedules: list[dict[str, Any]] = []
        super().__init__([self.status, self.rows], **kwargs)
        self.refresh_now()

    def refresh_now(self) -> None:
        try:
            self.schedules = self.client.schedules(mine=True)
        except GPUSchedError as exc:
            self.status.value = error_html(str(exc))
            return
        self.status.value = f"<b>{len(self.schedules)}</b> schedule(s)"
        self.rows.children = [self._row(s) for s in self.schedules]

    def set_paused(self, schedule_id: str, paused: bool) -> None:
        """Pause or resume one schedule (what its button does), then show the list again."""
        try:
            self.client.update_schedule(schedule_id, paused=paused)
        except GPUSchedError as exc:
            self.status.value = error_html(str(exc))
            return
        self.refresh_now()

    def _row(self, s: dict[str, Any]) -> w.HBox:
        what = s.get("notebook") or f"pipeline of {len((s.get('pipeline') or {}).get('steps', []))} steps"
        when = "paused" if s["paused"] else f"next {s.get('next_run') or '-'}"
        last = f"last: {s.get('last_state') or '-'}"
        label = w.HTML(
            f"<code>{html.escape(s['id'])}</code> {html.escape(what)} &middot; <code>{html.escape(s['cron'])}</code> "
            f"{html.escape(s['timezone'])} &middot; {html.escape(when)} &middot; {html.escape(last)}"
        )
        button = w.Button(description="Resume" if s["paused"] else "Pause", icon="play" if s["paused"] else "pause")
        button.on_click(lambda _, sid=s["id"], paused=not s["paused"]: self.set_paused(sid, paused))
        return w.HBox([label, button])


class ForecastChart(_UsesClient, w.VBox):
    """GPU demand history per tenant (and the forecast band when the server offers one), as a plot."""

    def __init__(self, client: Client | None = None, minutes: int = 24 * 60, **kwargs):
        self._client = client
        self.minutes = minutes
        self.plot = Plot()
        self.note = w.HTML(value="")
        self.usage: dict[str, Any] = {}
        self.forecast: dict[str, Any] | None = None
        super().__init__([self.note, self.plot], **kwargs)
        self.refresh_now()

    def refresh_now(self) -> None:
        try:
            self.usage = self.client.usage(self.minutes)
            self.forecast = self.client.forecast()
        except GPUSchedError as exc:
            self.note.value = error_html(str(exc))
            return
        self.plot.show(self.figure())
        if not self.usage.get("minutes"):
            self.note.value = "No demand recorded yet: the server writes one point a minute while it runs."
        elif self.forecast is None:
            self.note.value = "Demand history. This server has no forecaster yet, so no forecast band is shown."
        else:
            self.note.value = f"Demand history and forecast ({html.escape(str(self.forecast.get('model', '')))})."

    def figure(self) -> Any:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 3), dpi=100)
        ax = fig.add_subplot()
        # matplotlib plots datetimes (its stubs only say numbers)
        times: list[Any] = [datetime.fromisoformat(t) for t in self.usage.get("minutes", [])]
        total_req = [0] * len(times)
        total_alloc = [0] * len(times)
        for tenant, series in sorted(self.usage.get("tenants", {}).items()):
            ax.plot(times, series["requested"], label=f"{tenant} requested", linewidth=1)
            total_req = [a + b for a, b in zip(total_req, series["requested"], strict=True)]
            total_alloc = [a + b for a, b in zip(total_alloc, series["allocated"], strict=True)]
        if times:
            ax.plot(times, total_alloc, label="all allocated", color="black", linewidth=2)
        fc = self.forecast or {}
        if fc.get("times"):
            ft: list[Any] = [datetime.fromisoformat(t) for t in fc["times"]]
            ax.plot(ft, fc["values"], color="tab:purple", linestyle="--", label="forecast")
            if fc.get("lower") and fc.get("upper"):
                ax.fill_between(ft, fc["lower"], fc["upper"], color="tab:purple", alpha=0.2, label="forecast band")
        known = fc.get("scheduled") or {}
        if any(known.get("gpus", {}).values()):  # the recurring schedules' runs: demand known in advance
            kt: list[Any] = [datetime.fromisoformat(t) for t in known["times"]]
            total = [sum(col) for col in zip(*known["gpus"].values(), strict=True)]
            ax.step(kt, total, where="post", color="tab:orange", label="scheduled runs (known)")
        ax.set_ylabel("GPUs")
        span = f"{self.minutes / 60:.0f} h" if self.minutes >= 120 else f"{self.minutes} min"
        model = f", and its forecast ({fc['model']})" if fc.get("times") and fc.get("model") else ""
        ax.set_title(f"GPU demand per tenant, last {span}{model}")
        if times or fc.get("times"):
            ax.legend(loc="upper left", fontsize="small")
        fig.autofmt_xdate()
        return fig
