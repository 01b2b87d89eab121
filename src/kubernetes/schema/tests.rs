//! The generated table: it parses, it says what the apiserver's OpenAPI says, and it has not
//! drifted from its generator and inputs.
//!
//! Drift is checked in three steps, each able to fail on its own:
//! 1. `builtin.lock` records the SHA-256 of `builtin.json` and of the generator's files
//!    (`scripts/object-model/{go.mod,go.sum,main.go}`): a hand edit of the table, or a
//!    generator change without `make schemas`, fails here, offline.
//! 2. `builtin.json` records the SHA-256 of every OpenAPI input file; when the pinned module is
//!    in the Go module cache, the files there must match them, one for one.
//! 3. With `PORTCULLIS_SCHEMA_REGENERATE=1` (`make schemas-check`), the generator is run and its
//!    output must equal the committed table byte for byte.

use std::path::{Path, PathBuf};

use ring::digest::{SHA256, digest};

use super::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex(digest(&SHA256, bytes).as_ref())
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lock_entry(name: &str) -> String {
    let lock = std::fs::read_to_string(repo().join("src/kubernetes/schema/builtin.lock"))
        .expect("src/kubernetes/schema/builtin.lock is readable");
    lock.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("builtin.lock has no {name} line"))
        .to_owned()
}

#[test]
fn table_matches_its_lock() {
    assert_eq!(
        sha256(BUILTIN_TABLE.as_bytes()),
        lock_entry("table"),
        "src/kubernetes/schema/builtin.json differs from what `make schemas` wrote: run `make schemas`"
    );
}

#[test]
fn generator_matches_its_lock() {
    let mut bytes = Vec::new();
    for name in ["go.mod", "go.sum", "main.go"] {
        let path = repo().join("scripts/object-model").join(name);
        bytes.extend(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
    assert_eq!(
        sha256(&bytes),
        lock_entry("generator"),
        "scripts/object-model changed since the table was generated: run `make schemas`"
    );
}

/// The folder of the pinned OpenAPI documents in the Go module cache, if it is there.
fn spec_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("GOMODCACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("GOPATH").map(|p| PathBuf::from(p).join("pkg/mod")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go/pkg/mod")))?;
    let dir = cache.join("k8s.io/kubernetes@v1.37.2/api/openapi-spec/v3");
    dir.is_dir().then_some(dir)
}

#[test]
fn inputs_match_the_module_cache_when_present() {
    let raw: serde_json::Value = serde_json::from_str(BUILTIN_TABLE).unwrap();
    let recorded: Vec<(String, String)> = raw["inputs"]
        .as_array()
        .expect("the table lists its inputs")
        .iter()
        .map(|line| {
            let (sum, name) = line.as_str().unwrap().split_once(' ').unwrap();
            (name.to_owned(), sum.to_owned())
        })
        .collect();
    assert!(
        recorded.len() > 50,
        "only {} inputs recorded",
        recorded.len()
    );
    let Some(dir) = spec_dir() else {
        eprintln!("k8s.io/kubernetes@v1.37.2 is not in the Go module cache; inputs not compared");
        return;
    };
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, sha256(&std::fs::read(&path).unwrap()))
        })
        .collect();
    found.sort();
    let mut recorded = recorded;
    recorded.sort();
    assert_eq!(
        found, recorded,
        "the OpenAPI inputs differ from the ones the table was made from"
    );
}

#[test]
fn regenerating_gives_the_committed_table() {
    if std::env::var_os("PORTCULLIS_SCHEMA_REGENERATE").is_none() {
        eprintln!("set PORTCULLIS_SCHEMA_REGENERATE=1 (make schemas-check) to run the generator");
        return;
    }
    let output = std::process::Command::new("go")
        .args(["run", "."])
        .current_dir(repo().join("scripts/object-model"))
        .output()
        .expect("go runs");
    assert!(
        output.status.success(),
        "the generator failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stdout == BUILTIN_TABLE.as_bytes(),
        "the generator's output differs from src/kubernetes/schema/builtin.json: run `make schemas`"
    );
}

#[test]
fn table_parses_and_checks_its_references() {
    let table = parse_table(BUILTIN_TABLE).unwrap();
    assert!(table.kinds.len() > 200, "{} kinds", table.kinds.len());
    // Types are decoded when first reached; every one of the table decodes.
    assert!(table.types.types.iter().all(|slot| slot.get().is_none()));
    table.types.decode_all().unwrap();
    assert!(parse_table(r#"{"kinds": [["", "v1", "Pod", 3]], "types": []}"#).is_err());
    let broken = parse_table(
        r#"{"kinds": [], "types": [{"n": "x", "go": "X", "f": [{"n": "a", "t": {"k": "object", "go": "X", "r": 9}}]}]}"#,
    )
    .unwrap();
    assert!(broken.types.decode_all().is_err());
}

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind {
        group: group.to_owned(),
        version: version.to_owned(),
        kind: kind.to_owned(),
    }
}

fn keys(schema: &Schema, path: &str) -> Vec<String> {
    match schema.node_at(path).map(|node| node.kind) {
        Some(NodeKind::List {
            list_type: ListType::Map,
            keys,
            ..
        }) => keys,
        other => panic!("{path} is not a map list: {other:?}"),
    }
}

#[test]
fn built_in_kinds_have_the_apiservers_shapes() {
    let pod = builtin(&gvk("", "v1", "Pod")).unwrap();
    assert_eq!(pod.root().go_name, "Pod");
    assert_eq!(keys(&pod, "spec.containers"), ["name"]);
    assert_eq!(
        keys(&pod, "spec.containers.ports"),
        ["containerPort", "protocol"]
    );
    assert_eq!(
        keys(&pod, "spec.topologySpreadConstraints"),
        ["topologyKey", "whenUnsatisfiable"]
    );
    assert!(matches!(
        pod.node_at("spec.tolerations").unwrap().kind,
        NodeKind::List {
            list_type: ListType::Atomic,
            ..
        }
    ));
    assert!(matches!(
        pod.node_at("metadata.finalizers").unwrap().kind,
        NodeKind::List {
            list_type: ListType::Set,
            ..
        }
    ));
    assert!(matches!(
        pod.node_at("spec.nodeSelector").unwrap().kind,
        NodeKind::Map { atomic: true, .. }
    ));
    assert_eq!(
        pod.node_at("spec.hostNetwork").unwrap().kind,
        NodeKind::Boolean
    );
    assert_eq!(
        pod.node_at("spec.priority").unwrap().kind,
        NodeKind::Integer(IntKind::I32)
    );
    assert_eq!(
        pod.node_at("spec.containers.livenessProbe.httpGet.port")
            .unwrap()
            .kind,
        NodeKind::IntOrString
    );
    assert_eq!(
        pod.node_at("spec.containers").unwrap().go_type,
        "[]v1.Container"
    );
    assert!(pod.node_at("spec.noSuchField").is_none());

    let spec = pod.object(match pod.node_at("spec").unwrap().kind {
        NodeKind::Object(index) => index,
        _ => unreachable!(),
    });
    assert_eq!(spec.go_name, "PodSpec");
    let containers = spec.field("containers").unwrap();
    assert!(!containers.omit_empty);
    let automount = spec.field("automountServiceAccountToken").unwrap();
    assert!(automount.omit_empty && automount.pointer);
    let policy = pod
        .object(match pod.node_at("spec.containers.ports").unwrap().kind {
            NodeKind::List { items, .. } => match items.kind {
                NodeKind::Object(index) => index,
                _ => unreachable!(),
            },
            _ => unreachable!(),
        })
        .field("protocol")
        .unwrap()
        .default
        .clone();
    assert_eq!(policy, Some(serde_json::json!("TCP")));

    let deployment = builtin(&gvk("apps", "v1", "Deployment")).unwrap();
    let NodeKind::Object(selector) = deployment.node_at("spec.selector").unwrap().kind else {
        panic!("a selector is an object");
    };
    assert!(deployment.object(selector).atomic);

    for (group, version, kind) in [
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "v1", "APIService"),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingAdmissionPolicy",
        ),
    ] {
        assert!(builtin(&gvk(group, version, kind)).is_some(), "{kind}");
    }
    assert!(builtin(&gvk("example.com", "v1", "Widget")).is_none());
    assert!(builtin(&gvk("", "v2", "Pod")).is_none());

    // A recursive type is reachable without cycles of pointers.
    let crd = builtin(&gvk(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
    ))
    .unwrap();
    assert!(
        crd.node_at("spec.versions.schema.openAPIV3Schema.properties.properties.items")
            .is_some()
    );
    let ext = crd
        .node_at("spec.versions.schema.openAPIV3Schema.x-kubernetes-list-type")
        .unwrap();
    assert_eq!(ext.kind, NodeKind::String);
}
