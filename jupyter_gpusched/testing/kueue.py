"""A real Kueue (the kueue manager binary, built from Go modules by `scripts/kueue.sh`) on the test control plane.

No container and no cluster Deployment: the manager runs as a local process with the test cluster's admin
kubeconfig. What that takes:

- **CRDs from the module source** (`scripts/kueue.sh crds`), applied server-side. Kueue v0.15 stores v1beta1 and
  converts to the v1beta2 it works in through a conversion webhook; here each CRD is applied with v1beta2 as its
  only (served and storage) version instead, so nothing ever needs converting. Clients use `kueue.x-k8s.io/v1beta2`.
- **No webhooks.** The API server is never told about Kueue's webhooks (no Validating/MutatingWebhookConfiguration),
  so nothing defaults or validates objects for Kueue: a Job must be created already suspended
  (`spec.suspend: true`) with its `kueue.x-k8s.io/queue-name` label, and queues fully specified (`make_queues`
  does). The webhook server still starts (on a free port, with a self-signed certificate in the folder): the
  manager's readiness check waits for it.
- **Configuration** (`config.kueue.x-k8s.io/v1beta2`, written to the folder): leader election off, internal
  certificate management off, the `batch/job` integration only, `manageJobsWithoutQueueName: false`,
  waitForPodsReady off, health and metrics on free local ports, the features that need more of a cluster
  (MultiKueue, TopologyAwareScheduling, VisibilityOnDemand) off, client QPS/burst as given.
- **The metrics certificate.** With internal certificate management off, the v0.15 manager reads its metrics
  server's certificate from the fixed path /etc/kueue/metrics/certs (a mounted Secret in a real deployment) and
  exits without it, so `running_kueue` writes a self-signed pair there when none exists (and raises
  `Unavailable` if it cannot).

The manager's log is `kueue.log` in the folder.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends.kubernetes import Api, KubeApiError, KubernetesConfig
from . import Unavailable
from .kwok import SIM_IMAGE, KwokCluster
from .net import free_port
from .waits import wait_until

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kueue.sh"
API = "/apis/kueue.x-k8s.io/v1beta2"
API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
FLAVOR = "default-flavor"
FIELD_MANAGER = "gpusched-testing"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")  # fixed in kueue's cmd/kueue/main.go (v0.15)
OFF_FEATURES = ("MultiKueue", "TopologyAwareScheduling", "VisibilityOnDemand")


def _script(*args: str) -> str | None:
    if not SCRIPT.exists():
        return None
    try:
        r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    out = r.stdout.strip()
    return out if r.returncode == 0 and out else None


def kueue_binary() -> Path | None:
    """The kueue manager `scripts/kueue.sh build` made (under $GPUSCHED_CACHE like the script), or None."""
    out = _script("path")
    return Path(out) if out and os.access(out, os.X_OK) else None


def crd_dir() -> Path | None:
    """The folder of Kueue's CRD YAMLs in the (downloaded) module source, or None."""
    out = _script("crds")
    return Path(out) if out and Path(out).is_dir() else None


# --- certificates, config, CRDs -------------------------------------------------------------------------------
def self_signed(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> None:
    """Write a self-signed serving certificate for `hosts` as folder/tls.crt and folder/tls.key."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subj = "/CN=kueue-testing"
        san = ",".join(f"IP:{h}" if h[0].isdigit() else f"DNS:{h}" for h in hosts)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
            + ["-days", "3650", "-subj", subj, "-addext", f"subjectAltName={san}"]
            + ["-keyout", str(folder / "tls.key"), "-out", str(folder / "tls.crt")],
            check=True,
            capture_output=True,
        )
        return
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-testing")])
    alt: list[x509.GeneralName] = []
    for h in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            alt.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def ensure_metrics_cert(folder: Path = METRICS_CERT_DIR) -> None:
    """The metrics server's certificate where the manager looks for it (see the module docstring)."""
    if (folder / "tls.crt").exists() and (folder / "tls.key").exists():
        return
    try:
        self_signed(folder)
    except OSError as exc:
        raise Unavailable(
            f"the kueue manager needs a certificate in {folder} (fixed path) and it cannot be written: {exc}"
        ) from None


def kueue_config(
    folder: Path, *, webhook_port: int, health_port: int, metrics_port: int, qps: float, burst: int
) -> dict[str, Any]:
    """The manager's Configuration (see the module docstring)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "readinessEndpointName": "/readyz",
            "livenessEndpointName": "/healthz",
        },
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(folder / "webhook-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "clientConnection": {"qps": qps, "burst": burst},
        # As in Kueue's own manifests (config/components/manager/controller_manager_config.yaml).
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {f: False for f in OFF_FEATURES},
    }


def v1beta2_only(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD with v1beta2 as its only served and storage version (no conversion webhook needed)."""
    versions = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    if not versions:
        return crd
    for v in versions:
        v["served"] = True
        v["storage"] = True
        v.pop("deprecated", None)
        v.pop("deprecationWarning", None)
    crd["spec"]["versions"] = versions
    crd["spec"].pop("conversion", None)
    return crd


def apply(api: Api, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Server-side apply `obj` at `path` (the object's own URL), forcing our field manager."""
    return api.request(
        "PATCH",
        path,
        body=dict(obj),
        query={"fieldManager": FIELD_MANAGER, "force": True},
        content_type="application/apply-patch+yaml",
    )


def apply_crds(api: Api, folder: Path | None = None, timeout: float = 60.0) -> list[str]:
    """Apply Kueue's CRDs (v1beta2 only) and wait until the API server serves them; returns their names."""
    import yaml

    folder = folder or crd_dir()
    if folder is None:
        raise Unavailable("Kueue's CRDs are not available: run `bash scripts/kueue.sh build`")
    names = []
    for f in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            crd = v1beta2_only(doc)
            name = crd["metadata"]["name"]
            apply(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", crd)
            names.append(name)

    def established() -> bool:
        for name in names:
            crd = api.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = (crd.get("status") or {}).get("conditions") or ()
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                return False
        return True

    wait_until(established, timeout, "Kueue's CRDs to be established", 0.2)
    return names


# --- the manager ----------------------------------------------------------------------------------------------
@dataclass
class Kueue:
    """A running kueue manager (see `running_kueue`)."""

    folder: Path
    api: Api
    process: subprocess.Popen
    health_port: int
    cluster: KwokCluster | None = None

    @property
    def log(self) -> Path:
        return self.folder / "kueue.log"

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (the manager shuts its controllers down), SIGKILL after `timeout` s."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _is_active(obj: Mapping[str, Any]) -> bool:
    conds = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conds)


@contextmanager
def running_kueue(
    cluster: KwokCluster | str | Path,
    folder: Path,
    *,
    qps: float = 50.0,
    burst: int = 100,
    timeout: float = 120.0,
) -> Iterator[Kueue]:
    """Apply Kueue's CRDs to `cluster` (a KwokCluster or a kubeconfig path), start the manager with its
    Configuration and log in `folder`, wait until it is ready (its readyz, and a probe ClusterQueue turning
    Active), and stop it on exit. `qps`/`burst`: its client's rate limit (Kueue's manifests: 50/100; a negative
    qps turns the limit off)."""
    binary = kueue_binary()
    if binary is None:
        raise Unavailable("the kueue manager is not built: run `bash scripts/kueue.sh build` (about 40 minutes)")
    kubeconfig = Path(cluster.kubeconfig if isinstance(cluster, KwokCluster) else cluster)
    folder.mkdir(parents=True, exist_ok=True)
    api = Api(KubernetesConfig(kubeconfig=str(kubeconfig), request_timeout=30))
    proc: subprocess.Popen | None = None
    try:
        apply_crds(api)
        try:
            api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
            )
        except KubeApiError as exc:
            if exc.status != 409:
                raise
        ensure_metrics_cert()
        self_signed(folder / "webhook-certs")
        health_port = free_port()
        config = kueue_config(
            folder,
            webhook_port=free_port(),
            health_port=health_port,
            metrics_port=free_port(),
            qps=qps,
            burst=burst,
        )
        (folder / "config.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        with open(folder / "kueue.log", "ab") as log:
            proc = subprocess.Popen(
                [str(binary), f"--config={folder / 'config.yaml'}", "--zap-log-level=info"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        k = Kueue(folder, api, proc, health_port, cluster if isinstance(cluster, KwokCluster) else None)

        def ready() -> bool:
            if not k.alive():
                raise RuntimeError(f"the kueue manager exited ({proc.returncode}):\n{k.log_tail()}")
            return k.ready()

        wait_until(ready, timeout, "the kueue manager's readyz", 0.2)
        # The controllers are up once a ClusterQueue turns Active (an empty one needs no flavor).
        probe = {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": "gpusched-probe"},
            "spec": {"namespaceSelector": {}},
        }
        apply(api, f"{API}/clusterqueues/gpusched-probe", probe)
        wait_until(
            lambda: ready() and _is_active(api.request("GET", f"{API}/clusterqueues/gpusched-probe")),
            timeout,
            "a ClusterQueue to turn Active",
            0.2,
        )
        api.request("DELETE", f"{API}/clusterqueues/gpusched-probe")
        yield k
    finally:
        if proc is not None and proc.poll() is None:
            Kueue(folder, api, proc, 0).stop()
        api.close()


# --- queues and jobs ------------------------------------------------------------------------------------------
def make_queues(
    api: Api,
    namespace: str,
    quotas: Mapping[str, int],
    cohort: str | None = None,
    *,
    borrowing_limit: int | None = None,
    prefix: str = "",
    flavor: str = FLAVOR,
    cpu: str = "100k",
    memory: str = "100Ti",
    timeout: float = 60.0,
) -> dict[str, str]:
    """One ResourceFlavor (`flavor`, no node labels), a ClusterQueue `prefix+tenant` per tenant covering cpu,
    memory (large quotas) and nvidia.com/gpu (`quotas[tenant]` GPUs; in `cohort` with `borrowing_limit` when
    given), and a LocalQueue named after the tenant in `namespace`. Applied server-side, so calling it again
    updates them. Waits until every queue is Active; returns {tenant: ClusterQueue name}."""
    apply(
        api,
        f"{API}/resourceflavors/{flavor}",
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}},
    )
    names: dict[str, str] = {}
    for tenant, gpus in quotas.items():
        gpu_quota: dict[str, Any] = {"name": GPU, "nominalQuota": str(int(gpus))}
        if cohort is not None and borrowing_limit is not None:
            gpu_quota["borrowingLimit"] = str(int(borrowing_limit))
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                                gpu_quota,
                            ],
                        }
                    ],
                }
            ],
        }
        if cohort is not None:
            spec["cohortName"] = cohort
        cq = names[tenant] = f"{prefix}{tenant}"
        apply(
            api,
            f"{API}/clusterqueues/{cq}",
            {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec},
        )
        apply(
            api,
            f"{API}/namespaces/{namespace}/localqueues/{tenant}",
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": tenant, "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        )

    def active() -> bool:
        return all(
            _is_active(api.request("GET", f"{API}/clusterqueues/{cq}"))
            and _is_active(api.request("GET", f"{API}/namespaces/{namespace}/localqueues/{tenant}"))
            for tenant, cq in names.items()
        )

    wait_until(active, timeout, f"the ClusterQueues {sorted(names.values())} and their LocalQueues to be Active", 0.2)
    return names


def plain_job(
    name: str,
    namespace: str,
    queue: str,
    gpus: int,
    *,
    duration: float = 1.0,
    cpu: str = "1",
    memory: str = "1Gi",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A plain suspended batch/v1 Job for Kueue's LocalQueue `queue`: one pod holding `gpus` GPUs that the kwok
    stages end after `duration` s (what Kueue's webhook would otherwise default is set here)."""
    res = {"cpu": cpu, "memory": memory, GPU: str(int(gpus))}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue, **(labels or {})}},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"gpusched.io/sim-duration": f"{float(duration)}s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": SIM_IMAGE,
                            "command": ["true"],
                            "resources": {"requests": dict(res), "limits": dict(res)},
                        }
                    ],
                },
            },
        },
    }


def workloads(api: Api, namespace: str) -> list[dict[str, Any]]:
    return list(api.request("GET", f"{API}/namespaces/{namespace}/workloads").get("items") or ())


def condition(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether `obj` has status condition `kind` True (Workloads: QuotaReserved, Admitted, Finished...)."""
    conds = (obj.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == kind and c.get("status") == "True" for c in conds)
