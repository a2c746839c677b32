"""The stall watch on the Prometheus path (issue 20): a real Prometheus backfilled with dcgm-exporter and
cAdvisor series for three running jobs' pods, the Kubernetes way (pod-mapped labels):
- `busy`: GPU at ~90 %, CPU barely used: computing; never stalled, no idle GPU-hours;
- `idle`: GPU at 0 %, CPU flat, memory still held: stalled once its timeout passes; all its GPU-hours idle;
- `starved`: GPU at ~15 % while its container burns 1.5 cores and reads 10 MiB/s: waiting on data (with
  the figures), not stalled."""

from __future__ import annotations

import time

import pytest

from jupyter_gpusched.core import Cluster, JobSpec, JobState, NodeSpec, Scheduler, Tenant
from jupyter_gpusched.core.stalls import StallRules
from jupyter_gpusched.service.info import JobInfo
from jupyter_gpusched.service.stalls import StallSettings, StallWatch, prometheus_activity
from jupyter_gpusched.testing.prometheus import backfilled_prometheus, gauge_lines
from jupyter_gpusched.testing.waits import wait_until

pytestmark = pytest.mark.timeout(120)

STEP = 15  # seconds between samples, as dcgm-exporter's default scrape
MINUTES = 12
POD = 'namespace="ml",pod="gpusched-{job}-x7k2q",container="notebook"'
SELECTOR = 'namespace="ml",pod=~"gpusched-{job}-.*"'
JOBS = {  # job id -> (its GPU on node-a, GPU %, CPU cores, storage MiB/s, GPU memory MiB)
    "busy": (0, 90.0, 0.05, 0.0, 30_000.0),
    "idle": (1, 0.0, 0.0, 0.0, 12_000.0),
    "starved": (2, 15.0, 1.5, 10.0, 8_000.0),
}
TIMEOUT = 300.0


def openmetrics(start: int) -> str:
    times = [start + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
    util, fb, cpu, reads, writes = [], [], [], [], []
    for job, (index, gpu, cores, mib_s, memory) in JOBS.items():
        pod = POD.replace("{job}", job)
        dcgm = f'gpu="{index}",UUID="GPU-node-a-{index}",Hostname="node-a",{pod}'
        for i, t in enumerate(times):
            wobble = (i % 3) - 1  # a little noise, as real samples have
            util.append((dcgm, max(0.0, gpu + wobble * (gpu > 0)), t))
            fb.append((dcgm, memory, t))
            cpu.append((f"{pod}", 100.0 + cores * (t - start), t))  # counters: they only grow
            reads.append((f'{pod},device="/dev/nvme0n1"', mib_s * 1024 * 1024 * (t - start), t))
            writes.append((f'{pod},device="/dev/nvme0n1"', 0.0, t))
    lines = [
        *gauge_lines("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", util),
        *gauge_lines("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", fb),
        *gauge_lines("container_cpu_usage_seconds_total", "Cumulative cpu time consumed.", cpu),
        *gauge_lines("container_fs_reads_bytes_total", "Cumulative bytes read.", reads),
        *gauge_lines("container_fs_writes_bytes_total", "Cumulative bytes written.", writes),
        "# EOF",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    start = (int(time.time()) // 3600 - 2) * 3600  # a whole hour, recent enough for the TSDB's retention
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics(start)) as url:
        yield url, start


def running_jobs(start: float) -> tuple[Scheduler, dict[str, JobInfo]]:
    s = Scheduler(Cluster([NodeSpec("node-a", 4)]), [Tenant("ml", 4)], "fifo")
    for job_id in JOBS:
        s.submit(JobSpec(notebook=f"{job_id}.ipynb", tenant="ml", owner="u"), start, job_id=job_id)
    s.schedule(start)
    for job_id in JOBS:
        s.started(job_id, start)
    return s, {job_id: JobInfo() for job_id in JOBS}


def test_dcgm_and_cadvisor_series_give_each_job_its_figures(prom):
    url, start = prom
    settings = StallSettings(prometheus_url=url, gpu_selector=SELECTOR, process_selector=SELECTOR)
    at = start + 6 * 60
    busy = prometheus_activity(settings, "busy", (("node-a", (0,)),), at)
    assert busy is not None and 88 <= busy.gpu_util <= 92 and busy.gpu_memory_mib == 30_000
    assert busy.cpu_seconds == pytest.approx(100 + 0.05 * 360) and busy.io_bytes == 0
    assert prometheus_activity(settings, "nobody", (("node-a", (0,)),), at) is None  # no series: no report
    hosts = StallSettings(prometheus_url=url)  # the default: the allocation's node and GPU indices
    starved = prometheus_activity(hosts, "starved", (("node-a", (2,)),), at)
    assert starved is not None and starved.gpu_util == pytest.approx(15, abs=1) and starved.cpu_seconds is None


def test_busy_idle_and_starved_jobs_get_the_right_flags(prom):
    url, start = prom
    now = {"t": float(start)}
    settings = StallSettings(
        timeout=TIMEOUT, on_stall="alert", prometheus_url=url, gpu_selector=SELECTOR, process_selector=SELECTOR
    )
    watch = StallWatch(settings, lambda: now["t"])
    scheduler, infos = running_jobs(start)
    seen_stalled: dict[str, float] = {}
    for minute in range(2, MINUTES + 1):  # a sample a minute, as the service takes them
        now["t"] = start + minute * 60
        for job_id in JOBS:
            job = scheduler.jobs[job_id]
            report = prometheus_activity(settings, job_id, job.allocation, now["t"])
            watch.observe(job, infos[job_id], report, "prometheus")
        watch.sweep(scheduler, infos, now["t"], lambda job, why: None)
        for job_id, info in infos.items():
            if info.stalled_since is not None:
                seen_stalled.setdefault(job_id, now["t"])

    assert set(seen_stalled) == {"idle"}
    # its last progress was the first report (minute 2): stalled TIMEOUT later, at the first sample past it
    assert seen_stalled["idle"] == start + 2 * 60 + TIMEOUT
    assert scheduler.jobs["idle"].state is JobState.RUNNING  # alert: marked, not stopped
    assert [e.reason for e in scheduler.drain_events() if e.job_id == "idle" and e.dst is e.src][0].startswith(
        "stalled: no progress for 300 s"
    )

    starved = infos["starved"]
    assert starved.waiting_on_data == {"gpu_util": pytest.approx(15, abs=1), "cpu_cores": 1.5, "io_mib_s": 10.0}
    assert starved.progress_why == "GPU busy" and starved.stalled_since is None  # 15 % is above gpu_busy
    assert infos["busy"].waiting_on_data is None and infos["idle"].waiting_on_data is None
    assert infos["busy"].progress_why == "GPU busy"

    reported = (MINUTES - 2) * 60  # GPU-seconds between the first and the last sample, one GPU each
    assert {j: i.gpu_s for j, i in infos.items()} == {j: reported for j in JOBS}
    assert infos["idle"].idle_gpu_s == reported and infos["busy"].idle_gpu_s == 0
    assert infos["starved"].data_wait_gpu_s == reported
    assert infos["idle"].activity is not None and infos["idle"].activity["gpu_memory_mib"] == 12_000


def test_the_service_samples_prometheus_off_the_loop_and_hands_back_reports(prom):
    url, start = prom
    settings = StallSettings(prometheus_url=url, gpu_selector=SELECTOR, prometheus_interval=60.0)
    watch = StallWatch(settings, lambda: start)
    scheduler, _ = running_jobs(start)
    running = list(scheduler.active.values())
    try:
        assert watch.sample_prometheus(running, start + 300) == {}  # started on the worker thread
        reports = wait_until(lambda: watch.sample_prometheus(running, start + 310), 30, "the sample", 0.05)
        assert set(reports) == set(JOBS) and reports["idle"].gpu_util == 0
        assert watch.sample_prometheus(running, start + 320) == {}  # the next one is not due yet
    finally:
        watch.close()


def test_rules_are_the_defaults_the_docs_give():
    assert StallRules() == StallRules(
        cpu_busy=0.25, io_busy_bytes_s=1024 * 1024, gpu_busy=10.0, gpu_memory_step_mib=64.0, input_bound_gpu=30.0
    )
