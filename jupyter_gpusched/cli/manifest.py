"""`jupyter gpusched manifest`: print the Job and ConfigMap the Kubernetes backend would create for a notebook."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ..backends.base import validate_parameters
from ..backends.kubernetes import (
    KubernetesBackend,
    KubernetesConfig,
    build_manifests,
    manifest_yaml,
    placement_patch,
)
from ..core.model import JobSpec, Priority
from ..core.spec_fields import DEFAULT_PRIORITY, PRIORITY_CHOICES
from ..params import param_arg

log = logging.getLogger(__name__)

DESCRIPTION = "print the Job and ConfigMap YAML the backend would create."


def manifest_main(argv: list[str]) -> int:
    """`jupyter gpusched manifest NOTEBOOK [...]`: print the Job and ConfigMap YAML the backend would create."""
    p = argparse.ArgumentParser(prog="jupyter gpusched manifest", description=DESCRIPTION)
    p.add_argument("notebook")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--priority", choices=PRIORITY_CHOICES, default=DEFAULT_PRIORITY)
    p.add_argument("--tenant", default="default")
    p.add_argument("--owner", default=os.environ.get("USER", ""))
    p.add_argument("-p", "--param", dest="params", action="append", type=param_arg, default=[], metavar="NAME=VALUE")
    p.add_argument("--max-runtime", type=float)
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--preemptible", action="store_true")
    p.add_argument("--gpu-type", help="a pool's GPU type; a MIG profile (mig-1g.10gb) requests that slice resource")
    p.add_argument("--job-id", default="example", help="job id to name the Job after (default: example)")
    p.add_argument("--node", help="show the admission patch for this node")
    p.add_argument("--pool", help="pool of --node")
    p.add_argument("--spot", action="store_true", help="--node is a spot node (adds the toleration)")
    p.add_argument("--namespace", help="default: c.KubernetesBackend.namespace")
    p.add_argument("--image", help="default: c.KubernetesBackend.image")
    p.add_argument("--config", help="a jupyter_server_config.py/.json to read c.KubernetesBackend.* from")
    p.add_argument("--no-configmap", action="store_true", help="print only the Job")
    args = p.parse_args(argv)
    cfg = config_from_files(args.config)
    if args.namespace:
        cfg = dataclasses.replace(cfg, namespace=args.namespace, tenant_namespaces={})
    if args.image:
        cfg = dataclasses.replace(cfg, image=args.image)
    try:
        text = Path(args.notebook).read_text(encoding="utf-8")
        params = validate_parameters(dict(args.params))
        spec = JobSpec(
            notebook=args.notebook,
            gpus=args.gpus,
            priority=Priority.parse(args.priority),
            tenant=args.tenant,
            owner=args.owner,
            parameters=params,
            max_runtime=args.max_runtime,
            preemptible=args.preemptible,
            max_retries=args.max_retries,
            gpu_type=args.gpu_type,
        )
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    job, cm = build_manifests(args.job_id, spec, text, params, cfg)
    docs: list[dict[str, Any]] = [job] if args.no_configmap else [job, cm]
    out = manifest_yaml(docs)
    if args.node or args.pool:
        patch = placement_patch(args.node, args.pool or cfg.default_pool, args.spot, 1, cfg)
        out += "# admission: kubectl patch job {} -n {} --type=merge -p '{}'\n".format(
            job["metadata"]["name"], job["metadata"]["namespace"], json.dumps(patch, separators=(",", ":"))
        )
    sys.stdout.write(out)
    return 0


def config_from_files(path: str | None) -> KubernetesConfig:
    """The Kubernetes settings of one config file, or of Jupyter's config folders (jupyter_server_config.py /
    .json): `c.KubernetesBackend.*`, and the deprecated `c.GPUSched.k8s_*` where those are not set."""
    try:
        from jupyter_core.paths import jupyter_config_path
        from traitlets.config import Config
        from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

        if path:
            files = [Path(path)]
        else:
            files = [
                Path(d) / f"jupyter_server_config{ext}"
                for d in reversed(jupyter_config_path())
                for ext in (".json", ".py")
            ]
        config = Config()
        for f in files:
            if f.is_file():
                loader = PyFileConfigLoader if f.suffix == ".py" else JSONFileConfigLoader
                config.merge(loader(f.name, path=str(f.parent)).load_config())
        from ..server.app import GPUSched

        config = GPUSched(config=config).apply_backend_shortcuts()  # the deprecated c.GPUSched.k8s_* too
        return KubernetesBackend(config=config, start=False).cfg
    except Exception as exc:  # a broken config file must not hide the manifest
        log.warning("using the default kubernetes settings: %s", exc)
        return KubernetesConfig()
