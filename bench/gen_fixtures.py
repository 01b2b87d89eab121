#!/usr/bin/env python3
"""Writes the load benchmark's extra request bodies into bench/fixtures/ (committed):

- configmap-review.json: a small ConfigMap CREATE review (no rule of the bench sets matches it,
  so it measures TLS + HTTP + JSON parse/encode of a small body);
- pod-100kb-review.json: a compliant Pod CREATE of about 100 KB, grown from
  tests/fixtures/bench/pod-10kb.json: 10 containers (the VAP's limit) with 45 env vars each and
  the kubectl last-applied-configuration annotation, as `kubectl apply` leaves it;
- pod-44-containers-review.json: a small Pod CREATE (about 4 KB) with 44 containers, the object
  of the isolation run: bench/fixtures/heavy's triple comprehension over its containers costs
  within the apiserver's per-expression budget at 44 containers (issue 14's measurement);
- vap-trivial-1/policy.yaml, vap-trivial-21/policy.yaml: a ValidatingAdmissionPolicy with 1 and
  21 validations like issue 36's trivial one, for criterion's cost of one more validation.

Deterministic: rerunning it gives the same bytes. Usage: bench/gen_fixtures.py
"""
import copy
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "fixtures"
TARGET_100KB = 100 * 1024


def dump(path, review):
    text = json.dumps(review, indent=1, sort_keys=False) + "\n"
    path.write_text(text)
    return len(text.encode())


def configmap_review():
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench-configmap",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "shop-config",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "shop-config",
                    "namespace": "shop",
                    "labels": {"app": "shop", "team": "checkout"},
                },
                "data": {"LOG_LEVEL": "info", "FEATURE_X": "on", "CACHE_TTL": "30s"},
            },
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def pod_100kb_review(value_len):
    review = json.loads((ROOT / "tests/fixtures/bench/pod-10kb.json").read_text())
    review["request"]["uid"] = "bench-100kb"
    pod = review["request"]["object"]
    spec = pod["spec"]
    template = spec["containers"][0]
    containers = []
    for i in range(10):
        c = copy.deepcopy(template)
        c["name"] = f"app-{i}"
        c["image"] = f"registry.example.com/shop/service-{i}:1.{i}.7"
        c["ports"][0]["containerPort"] = 8080 + i
        for probe in ("readinessProbe", "livenessProbe"):
            c[probe]["httpGet"]["port"] = 8080 + i
        c["env"] = [
            {"name": f"SETTING_{j}", "value": f"value-{i}-{j}-" + "x" * value_len}
            for j in range(45)
        ]
        containers.append(c)
    spec["containers"] = containers
    applied = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]},
        "spec": {"containers": [{"name": c["name"], "image": c["image"], "env": c["env"][:12]}
                                for c in containers]},
    }
    pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = (
        json.dumps(applied, separators=(",", ":")) + "\n")
    return review


def pod_44_containers_review():
    containers = [{"name": f"c{i}", "image": f"registry.example.com/shop/c{i}:1.0.{i}"}
                  for i in range(44)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fan-out", "namespace": "shop", "labels": {"app": "fan-out"}},
        "spec": {"containers": containers},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench-44-containers",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "fan-out",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "alice@example.com", "groups": ["system:authenticated"]},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def trivial_validations_policy(count):
    """A ValidatingAdmissionPolicy (and its binding) on Pods with `count` trivial validations,
    each reading a label of its own."""
    name = f"bench-vap-trivial-{count}"
    validations = "".join(
        f"    - expression: \"object.metadata.?labels[?'bench-{i}'].orValue('') != 'forbidden'\"\n"
        f"      message: label bench-{i} is not 'forbidden'\n"
        for i in range(1, count + 1))
    return f"""# Written by bench/gen_fixtures.py. criterion's cost of one trivial validation
# (benches/admission.rs, group `validation-cost`): {count} validations like issue 36's trivial
# one, each reading a label of its own.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: [CREATE, UPDATE]
        resources: [pods]
  validations:
{validations}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
"""


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    size = dump(OUT / "configmap-review.json", configmap_review())
    print(f"bench/fixtures/configmap-review.json {size} bytes")
    # Grow the env values until the body passes 100 KiB.
    value_len = 20
    while len((json.dumps(pod_100kb_review(value_len), indent=1) + "\n").encode()) < TARGET_100KB:
        value_len += 1
    size = dump(OUT / "pod-100kb-review.json", pod_100kb_review(value_len))
    print(f"bench/fixtures/pod-100kb-review.json {size} bytes")
    size = dump(OUT / "pod-44-containers-review.json", pod_44_containers_review())
    print(f"bench/fixtures/pod-44-containers-review.json {size} bytes")
    for count in (1, 21):
        folder = OUT / f"vap-trivial-{count}"
        folder.mkdir(exist_ok=True)
        (folder / "policy.yaml").write_text(trivial_validations_policy(count))
        print(f"bench/fixtures/vap-trivial-{count}/policy.yaml")


if __name__ == "__main__":
    main()
