#!/usr/bin/env python3
"""Checks the recipes of docs/deploy/ (issue 16) without a cluster: the Kubernetes manifests
parse and hold what the tool relies on (an Indexed Job, completions = parallelism =
--shard-count, one absolute --start-at for every pod, the index reaching --output, 2 CPUs per
pod, the results volume), the Slurm script passes `bash -n` and keeps srun to one task per node,
and the Dockerfile is multi-stage. `kubectl apply --dry-run=client` runs where kubectl can reach
a cluster's API (it needs one for the kinds); otherwise it says that it is skipped. Fast: no
build, no network."""

import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEPLOY = os.path.join(ROOT, "docs", "deploy")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def kubernetes():
    try:
        import yaml
    except ImportError:
        print("recipes: python3 yaml is not installed: the manifests' fields are not checked")
        return
    path = os.path.join(DEPLOY, "kubernetes", "job.yaml")
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {d["kind"]: d for d in docs}
    check("Job" in kinds and "PersistentVolumeClaim" in kinds, "job.yaml: a Job and its PVC")
    job = kinds["Job"]["spec"]
    check(job.get("completionMode") == "Indexed", "job.yaml: completionMode Indexed")
    check(job.get("completions") == job.get("parallelism"), "job.yaml: completions == parallelism")
    pod = job["template"]["spec"]
    check(pod.get("restartPolicy") == "Never", "job.yaml: restartPolicy Never")
    # One shard's failure must not end the Job: Kubernetes would kill the other shards mid-run.
    check(job.get("backoffLimitPerIndex") == 0 and "backoffLimit" not in job,
          "job.yaml: backoffLimitPerIndex 0, no Job-wide backoffLimit")
    check(job.get("maxFailedIndexes") == job.get("completions"), "job.yaml: maxFailedIndexes == completions")
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    script = " ".join(container.get("command", []) + container.get("args", []))
    check(env.get("SHARD_COUNT") == str(job["completions"]), "job.yaml: SHARD_COUNT == completions")
    check('--shard-count "$SHARD_COUNT"' in script, "job.yaml: --shard-count from SHARD_COUNT")
    check('--start-at "$START_AT"' in script and "START_AT" in env, "job.yaml: one --start-at")
    check('--run-id "$RUN_ID"' in script and env.get("RUN_ID"), "job.yaml: --run-id")
    check("$JOB_COMPLETION_INDEX" in script, "job.yaml: the index names the shard's folder")
    check("--shard-index" not in script, "job.yaml: the tool reads JOB_COMPLETION_INDEX itself")
    # The tool must be the container's PID 1 (exec): a shell there does not pass SIGTERM on,
    # and a deleted Job would SIGKILL the tool with no summary written.
    check("exec duplexbench-tui run" in script, "job.yaml: exec, so the tool gets SIGTERM")
    pod_exit_codes(container["args"][0])
    # An index that fails (exit 1 or 2) must not end the Job: the others go on.
    check(job.get("maxFailedIndexes") == job.get("completions"), "job.yaml: every index may fail alone")
    res = container["resources"]
    check(str(res["requests"]["cpu"]) == "2" and res["requests"] == res["limits"],
          "job.yaml: 2 CPUs, requests == limits (Guaranteed QoS, pinnable)")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    check("results" in mounts and "/results/" in script, "job.yaml: results on the volume")
    check(vols["results"]["persistentVolumeClaim"]["claimName"]
          == kinds["PersistentVolumeClaim"]["metadata"]["name"], "job.yaml: the PVC is the one declared")
    with open(os.path.join(DEPLOY, "kubernetes", "merge-pod.yaml")) as f:
        merge = yaml.safe_load(f)
    margs = " ".join(merge["spec"]["containers"][0]["args"])
    check("duplexbench-tui merge /results/$RUN_ID/shard-*" in margs, "merge-pod.yaml: merges the shards")
    check(merge["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "duplexbench-results",
          "merge-pod.yaml: the same volume")
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("recipes: kubectl is not installed: `kubectl apply --dry-run=client` skipped")
        return
    probe = subprocess.run([kubectl, "version", "--request-timeout=3s"], capture_output=True)
    if probe.returncode != 0:
        print("recipes: kubectl reaches no cluster API: `kubectl apply --dry-run=client` skipped")
        return
    for name in ("job.yaml", "merge-pod.yaml"):
        text = open(os.path.join(DEPLOY, "kubernetes", name)).read().replace("START_AT_UTC", "2030-01-01T00:00:00Z")
        r = subprocess.run([kubectl, "apply", "--dry-run=client", "-f", "-"], input=text.encode(), capture_output=True)
        check(r.returncode == 0, f"kubectl apply --dry-run=client {name}: {r.stderr.decode().strip()}")


def pod_exit_codes(body):
    """The pod's shell, with a stand-in for the tool that exits with a given code: the pod ends
    with the tool's code (0 succeeds; 1, 2, 143 fail that index alone)."""
    import tempfile
    with tempfile.TemporaryDirectory() as bin_dir:
        stub = os.path.join(bin_dir, "duplexbench-tui")
        with open(stub, "w") as f:
            f.write("#!/bin/sh\nexit \"$STUB_CODE\"\n")
        os.chmod(stub, 0o755)
        for code, expect in ((0, 0), (1, 1), (2, 2), (143, 143)):
            env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                       STUB_CODE=str(code), JOB_COMPLETION_INDEX="0")
            r = subprocess.run(["sh", "-c", body], env=env, capture_output=True)
            check(r.returncode == expect, f"job.yaml: the tool's exit {code} ends the pod with {expect}, not {r.returncode}")


def slurm():
    path = os.path.join(DEPLOY, "slurm", "duplexbench.sbatch")
    r = subprocess.run(["bash", "-n", path], capture_output=True)
    check(r.returncode == 0, f"bash -n duplexbench.sbatch: {r.stderr.decode().strip()}")
    text = open(path).read()
    check("#SBATCH --ntasks-per-node=1" in text, "sbatch: one task per node")
    check("--ntasks-per-node=1" in text.split("srun", 1)[-1], "sbatch: srun one task per node")
    check('--start-at "$START_AT"' in text and "date -u" in text, "sbatch: one absolute --start-at")
    check("shard-$SLURM_PROCID" in text, "sbatch: each shard's folder on the shared filesystem")
    check(re.search(r'merge "\$RESULTS"/shard-\*', text) is not None, "sbatch: merge at the end")


def docker():
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    stages = re.findall(r"^FROM\s+\S+(?:\s+AS\s+(\w+))?", text, re.M)
    check(len(stages) >= 2 and stages[0] == "build", "Dockerfile: a build stage, then the image")
    check("COPY --from=build" in text, "Dockerfile: the image takes the binary from the build stage")
    check("--release --locked" in text, "Dockerfile: a locked release build")
    for copied in re.findall(r"^COPY (?!--)(\S+)", text, re.M):
        check(os.path.exists(os.path.join(ROOT, copied)), f"Dockerfile: COPY {copied} exists")
    ignore = open(os.path.join(DEPLOY, "Dockerfile.dockerignore")).read()
    for copied in re.findall(r"^COPY (?!--)(\S+)", text, re.M):
        check(f"!{copied.rstrip('/')}" in ignore.replace("/\n", "\n"), f"Dockerfile.dockerignore lets {copied} in")


kubernetes()
slurm()
docker()
if failures:
    for f in failures:
        print(f"recipes: FAILED {f}", file=sys.stderr)
    sys.exit(1)
print("recipes: docs/deploy checked")
