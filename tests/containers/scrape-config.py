"""Checks a Prometheus scrape config that uses Kubernetes service discovery, which Debian's promtool
cannot parse (it is built without it): every key is one Prometheus documents for its place, the
role is one of Kubernetes SD's, every relabel action is known and every regex compiles (Prometheus
anchors them: RE2 syntax, which Python's re accepts for these), and the labels it keeps or copies
are the pod role's meta labels. Exit 1 with one line per problem."""
import re
import sys

import yaml

SCRAPE = {"job_name", "scrape_interval", "scrape_timeout", "metrics_path", "scheme", "params",
          "honor_labels", "honor_timestamps", "kubernetes_sd_configs", "relabel_configs",
          "metric_relabel_configs", "static_configs", "tls_config", "authorization",
          "basic_auth", "sample_limit"}
K8S_SD = {"role", "namespaces", "selectors", "api_server", "kubeconfig_file", "attach_metadata"}
ROLES = {"node", "service", "pod", "endpoints", "endpointslice", "ingress"}
RELABEL = {"source_labels", "separator", "target_label", "regex", "modulus", "replacement",
           "action"}
ACTIONS = {"replace", "keep", "drop", "keepequal", "dropequal", "hashmod", "labelmap",
           "labeldrop", "labelkeep", "lowercase", "uppercase"}
POD_META = re.compile(r"__meta_kubernetes_(namespace|pod_[a-z_]+|pod_label_[a-zA-Z0-9_]+)$")

problems = []
doc = yaml.safe_load(open(sys.argv[1]))
jobs = doc.get("scrape_configs") if isinstance(doc, dict) else None
if not jobs:
    problems.append("no scrape_configs")
for job in jobs or []:
    name = job.get("job_name", "?")
    problems += [f"{name}: unknown key {k}" for k in job if k not in SCRAPE]
    for sd in job.get("kubernetes_sd_configs", []):
        problems += [f"{name}: kubernetes_sd_configs: unknown key {k}" for k in sd if k not in K8S_SD]
        if sd.get("role") not in ROLES:
            problems.append(f"{name}: role {sd.get('role')!r} is not one of {sorted(ROLES)}")
    for r in job.get("relabel_configs", []):
        problems += [f"{name}: relabel: unknown key {k}" for k in r if k not in RELABEL]
        if r.get("action", "replace") not in ACTIONS:
            problems.append(f"{name}: relabel: unknown action {r.get('action')!r}")
        try:
            re.compile(str(r.get("regex", "(.*)")))
        except re.error as e:
            problems.append(f"{name}: relabel: regex {r.get('regex')!r}: {e}")
        problems += [f"{name}: relabel: {l} is not a pod meta label" for l in r.get("source_labels", [])
                     if l.startswith("__meta_") and not POD_META.match(l)]
for p in problems:
    print(p)
print(f"{sys.argv[1]}: {'FAILED' if problems else 'ok'}")
sys.exit(1 if problems else 0)
