#!/usr/bin/env python3
"""Checks deploy/kubernetes without a cluster (kubectl is no Debian 12 package, and its client
dry-run still asks an API server): every document parses and has a known kind; every container has
an image and mounts only volumes its pod declares; hostPaths are absolute; the only gpushare.io
resources asked for are the two the plugin advertises; the plugin's flags exist and the paths it
hands the kubelet are mounted at the same path on the host; the ConfigMap's gpushared.json passes
`gpushared --check-config` and points at the plugin's allocation map and socket folder.

usage: check_manifests.py MANIFEST_DIR GPUSHARED GPUSHARE_DEVICE_PLUGIN
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

KNOWN = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("v1", "Pod"),
    ("v1", "ResourceQuota"), ("apps/v1", "DaemonSet"),
}
NAMESPACED = {"ServiceAccount", "ConfigMap", "Pod", "ResourceQuota", "DaemonSet"}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def flag_values(command):
    """{"--flag": value} of a command line written as separate items."""
    values, i = {}, 0
    while i < len(command):
        item = command[i]
        if item.startswith("--"):
            if "=" in item:
                name, value = item.split("=", 1)
                values[name] = value
            elif i + 1 < len(command) and not command[i + 1].startswith("--"):
                values[item] = command[i + 1]
                i += 1
            else:
                values[item] = None
        i += 1
    return values


def check_pod_spec(where, spec, advertised):
    volumes = {}
    for v in spec.get("volumes", []) or []:
        if not DNS_LABEL.match(v.get("name", "")):
            problem(where, f"volume name {v.get('name')!r} is not a DNS label")
        volumes[v["name"]] = v
        host = v.get("hostPath")
        if host is not None and not str(host.get("path", "")).startswith("/"):
            problem(where, f"volume {v['name']}: hostPath {host.get('path')!r} is not absolute")
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    if not spec.get("containers"):
        problem(where, "no containers")
    names = set()
    for c in containers:
        cw = f"{where} container {c.get('name')!r}"
        if not DNS_LABEL.match(c.get("name", "")):
            problem(cw, "name is not a DNS label")
        if c.get("name") in names:
            problem(cw, "name used twice")
        names.add(c.get("name"))
        if not c.get("image"):
            problem(cw, "no image")
        for m in c.get("volumeMounts", []) or []:
            if m.get("name") not in volumes:
                problem(cw, f"mounts volume {m.get('name')!r}, which the pod does not declare")
            if not str(m.get("mountPath", "")).startswith("/"):
                problem(cw, f"mountPath {m.get('mountPath')!r} is not absolute")
        resources = c.get("resources", {}) or {}
        limits = resources.get("limits", {}) or {}
        requests = resources.get("requests", {}) or {}
        for name in set(limits) | set(requests):
            if not name.startswith("gpushare.io/"):
                continue
            if name not in advertised:
                problem(cw, f"asks for {name}, which the plugin does not advertise "
                            f"({', '.join(sorted(advertised))})")
            if name in requests and requests[name] != limits.get(name):
                problem(cw, f"{name}: an extended resource's request must equal its limit")
            if not isinstance(limits.get(name), int) or limits.get(name) < 1:
                problem(cw, f"{name}: limit must be a positive whole number")
    return volumes, containers


def mounted_host_path(container, volumes, path):
    """The host path behind `path` in the container, when a hostPath volume is mounted there."""
    for m in container.get("volumeMounts", []) or []:
        v = volumes.get(m.get("name"), {})
        if "hostPath" in v and m.get("mountPath") == path:
            return v["hostPath"]["path"]
    return None


def main():
    manifest_dir, gpushared, plugin = sys.argv[1:4]
    plugin_help = subprocess.run([plugin, "--help"], capture_output=True, text=True).stdout
    documents = []
    files = sorted(glob.glob(os.path.join(manifest_dir, "*.yaml")))
    if not files:
        problem(manifest_dir, "no manifests")
    for path in files:
        try:
            for doc in yaml.safe_load_all(open(path, encoding="utf-8")):
                if doc is not None:
                    documents.append((os.path.basename(path), doc))
        except yaml.YAMLError as e:
            problem(path, f"not YAML: {e}")
    by_kind = {}
    for name, doc in documents:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        where = f"{name} {kind}/{doc.get('metadata', {}).get('name')}"
        if (api, kind) not in KNOWN:
            problem(where, f"unknown apiVersion/kind {api}/{kind}")
        if not doc.get("metadata", {}).get("name"):
            problem(where, "no metadata.name")
        if kind in NAMESPACED and not doc["metadata"].get("namespace"):
            problem(where, "no metadata.namespace")
        by_kind.setdefault(kind, []).append((name, doc))

    plugin_flags = {}
    for name, ds in by_kind.get("DaemonSet", []):
        where = f"{name} DaemonSet/{ds['metadata']['name']}"
        template = ds["spec"]["template"]
        selector = ds["spec"]["selector"]["matchLabels"]
        labels = template["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in selector.items()):
            problem(where, "the selector does not match the template's labels")
        spec = template["spec"]
        ns = ds["metadata"]["namespace"]
        accounts = {(d["metadata"]["namespace"], d["metadata"]["name"])
                    for _, d in by_kind.get("ServiceAccount", [])}
        if spec.get("serviceAccountName") and (ns, spec["serviceAccountName"]) not in accounts:
            problem(where, f"ServiceAccount {spec['serviceAccountName']} is not in the manifests")
        if not spec.get("hostPID"):
            problem(where, "gpushared needs hostPID: true to read its clients' cgroups")
        volumes, containers = check_pod_spec(where, spec, set())
        configs = {(d["metadata"]["namespace"], d["metadata"]["name"]): d
                   for _, d in by_kind.get("ConfigMap", [])}
        config_text = None
        for v in volumes.values():
            if "configMap" in v:
                cm = configs.get((ns, v["configMap"]["name"]))
                if cm is None:
                    problem(where, f"ConfigMap {v['configMap']['name']} is not in the manifests")
                else:
                    config_text = cm["data"].get("gpushared.json")
        daemon = next((c for c in containers if "/usr/sbin/gpushared" in (c.get("command") or [])), None)
        device_plugin = next((c for c in containers
                              if "/usr/sbin/gpushare-device-plugin" in (c.get("command") or [])), None)
        if daemon is None or device_plugin is None:
            problem(where, "needs a gpushared container and a gpushare-device-plugin container")
            continue
        plugin_flags = flag_values(device_plugin["command"])
        for flag in plugin_flags:
            if flag not in plugin_help:
                problem(where, f"gpushare-device-plugin has no flag {flag}")
        # Paths the plugin returns to the kubelet are host paths, so each must be mounted at the
        # very same path in the plugin's container (state) or exist on the host (library, socket).
        state = plugin_flags.get("--state-dir", "/var/lib/gpushare/device-plugin")
        if mounted_host_path(device_plugin, volumes, state) != state:
            problem(where, f"the plugin's --state-dir {state} is not the same host path")
        for path in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources"):
            if mounted_host_path(device_plugin, volumes, path) != path:
                problem(where, f"the plugin does not mount the host's {path}")
        socket_dir = plugin_flags.get("--socket-dir", "/run/gpushare")
        if mounted_host_path(daemon, volumes, socket_dir) != socket_dir:
            problem(where, f"gpushared does not put its socket in the host's {socket_dir}")
        library = plugin_flags.get("--library")
        library_dir = os.path.dirname(library or "")
        if not any(v.get("hostPath", {}).get("path") == library_dir for v in volumes.values()):
            problem(where, f"no hostPath volume puts the library in {library_dir}")
        if config_text is None:
            problem(where, "no gpushared.json in its ConfigMap")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(config_text)
        check = subprocess.run([gpushared, "--check-config", "--config", f.name],
                               capture_output=True, text=True)
        os.unlink(f.name)
        if check.returncode != 0:
            problem(where, "gpushared --check-config: " + check.stderr.strip())
        if "warning" in check.stdout:
            problem(where, "gpushared --check-config warns: " + check.stdout.strip())
        config = json.loads(config_text)
        if config.get("kubernetes", {}).get("allocations") != state + "/allocations.json":
            problem(where, "kubernetes.allocations is not the plugin's map, "
                           f"{state}/allocations.json")
        if os.path.dirname(config.get("socket", {}).get("path", "")) != socket_dir:
            problem(where, f"socket.path is not in the plugin's --socket-dir {socket_dir}")
        if any("uid" in rule or "user" in rule for rule in config.get("production", [])):
            problem(where, "a uid rule in a cluster: containers run as uid 0, all would match")

    prefix = plugin_flags.get("--resource-prefix", "gpushare.io")
    advertised = {f"{prefix}/production", f"{prefix}/opportunistic"}
    asked = set()
    for name, pod in by_kind.get("Pod", []):
        where = f"{name} Pod/{pod['metadata']['name']}"
        _, containers = check_pod_spec(where, pod["spec"], advertised)
        for c in containers:
            asked |= set((c.get("resources", {}) or {}).get("limits", {}) or {})
    if not advertised <= asked:
        problem(manifest_dir, "the example pods should ask for both "
                              + " and ".join(sorted(advertised)))

    if problems:
        print("\n".join(problems))
        return 1
    print(f"{len(documents)} documents in {len(files)} files: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
