//! A request's objects decoded into object views decide exactly as decoded into trees.
//!
//! `serve` decodes a wanted object into an [`ObjectView`](portcullis::admission::ObjectView)
//! at `/validate` unless Gatekeeper's ExpansionTemplates may run (every rule family reads
//! views), and any reader that needs a tree gets one built from the view. Both forms are held here to
//! the decisions of the tree form: every review fixture, at both endpoints, under policy sets
//! of every family; and for the load bench's sets no tree may be built for a Pod.

mod common;

use std::path::{Path, PathBuf};

use common::{body_bytes, post_json};
use portcullis::admission::{
    ObjectForm, Operation, ParsedReview, WantedObjects, parse_review, parse_review_as,
};
use portcullis::engine::{Endpoint, Engine, EvalContext};
use portcullis::policy::{parse_documents, read_documents};
use portcullis::server::{AppState, RequestSettings, webhook_router};
use serde_json::Value;
use tower::ServiceExt;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn engine(paths: &[&str]) -> Engine {
    let paths: Vec<PathBuf> = paths.iter().map(|path| root().join(path)).collect();
    Engine::compile(&read_documents(&paths).unwrap()).unwrap()
}

/// Every AdmissionReview fixture of the folders that hold them.
fn reviews() -> Vec<(String, Vec<u8>)> {
    let mut reviews = Vec::new();
    for folder in [
        "tests/fixtures/reviews",
        "tests/fixtures/pod_security_admission/reviews",
        "bench/fixtures",
    ] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(folder))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let body = std::fs::read(&path).unwrap();
            reviews.push((path.display().to_string(), body));
        }
    }
    reviews
}

fn parsed(body: &[u8], form: ObjectForm) -> ParsedReview {
    parse_review_as(body, &|_| WantedObjects::Both, form).unwrap()
}

#[test]
fn views_decide_as_trees_under_every_policy_family() {
    let engines = [
        ("built-in", Engine::builtin()),
        (
            "pod security",
            engine(&["tests/fixtures/bench/policies/pod-security.yaml"]),
        ),
        (
            "native and pod security",
            engine(&["tests/fixtures/bench/policies"]),
        ),
        (
            "admission policies",
            engine(&["bench/fixtures/vap", "bench/fixtures/vap-small"]),
        ),
        (
            "gatekeeper",
            engine(&[
                "tests/fixtures/gatekeeper/allowed-registries/templates",
                "tests/fixtures/gatekeeper/allowed-registries/constraints",
                "tests/fixtures/gatekeeper/cel-and-rego/templates",
                "tests/fixtures/gatekeeper/cel-and-rego/constraints",
            ]),
        ),
    ];
    let reviews = reviews();
    assert!(reviews.len() >= 25, "{}", reviews.len());
    let mut compared = 0;
    for (name, engine) in &engines {
        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
            let context = EvalContext::new(endpoint);
            for (path, body) in &reviews {
                let tree = parsed(body, ObjectForm::Tree).request;
                let view = parsed(body, ObjectForm::View).request;
                assert_eq!(
                    view.object.as_ref().map(|o| o.view().is_some()),
                    tree.object.as_ref().map(|_| true),
                    "{path}"
                );
                let from_tree = engine.evaluate(&tree, &context);
                let from_view = engine.evaluate(&view, &context);
                let case = format!("{name}, {endpoint:?}, {path}");
                match (from_tree, from_view) {
                    (Ok(from_tree), Ok(from_view)) => {
                        assert_eq!(from_view, from_tree, "{case}");
                        assert_eq!(from_view.patch, from_tree.patch, "{case}");
                        assert_eq!(from_view.patched_object, from_tree.patched_object, "{case}");
                        assert_eq!(from_view.outcomes, from_tree.outcomes, "{case}");
                    }
                    (Err(from_tree), Err(from_view)) => {
                        assert_eq!(from_view.to_string(), from_tree.to_string(), "{case}");
                    }
                    (from_tree, from_view) => panic!("{case}: {from_tree:?} / {from_view:?}"),
                }
                compared += 1;
            }
        }
    }
    assert_eq!(compared, engines.len() * 2 * reviews.len());
}

/// Every Gatekeeper fixture set, at the webhook: each of its objects created and updated, and
/// each of its AdmissionReviews, decides alike from views and from trees (templates in Rego
/// and CEL, matching by kinds, scope, namespaces, names and selectors, the excluder,
/// enforcement actions, expansion).
#[test]
fn gatekeeper_decides_alike_from_views_and_trees() {
    let context = EvalContext::new(Endpoint::Validate);
    let mut compared = 0;
    let mut sets: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures/gatekeeper"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("templates").is_dir())
        .collect();
    sets.sort();
    assert!(sets.len() >= 14, "{}", sets.len());
    for set in &sets {
        let policies: Vec<PathBuf> = ["templates", "constraints", "expansion"]
            .iter()
            .map(|folder| set.join(folder))
            .filter(|path| path.is_dir())
            .collect();
        let engine = Engine::compile(&read_documents(&policies).unwrap()).unwrap();
        let mut bodies = Vec::new();
        for file in files(&set.join("objects")) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (_, object) in parse_documents(&file, &text).unwrap() {
                for operation in ["CREATE", "UPDATE"] {
                    bodies.push((file.display().to_string(), review_of(&object, operation)));
                }
            }
        }
        for file in files(&set.join("reviews")) {
            bodies.push((file.display().to_string(), std::fs::read(&file).unwrap()));
        }
        for (path, body) in &bodies {
            let tree = parsed(body, ObjectForm::Tree).request;
            let view = parsed(body, ObjectForm::View).request;
            let from_tree = engine.evaluate(&tree, &context);
            let from_view = engine.evaluate(&view, &context);
            match (from_tree, from_view) {
                (Ok(from_tree), Ok(from_view)) => {
                    assert_eq!(from_view, from_tree, "{path}");
                    assert_eq!(from_view.outcomes, from_tree.outcomes, "{path}");
                }
                (Err(from_tree), Err(from_view)) => {
                    assert_eq!(from_view.to_string(), from_tree.to_string(), "{path}");
                }
                (from_tree, from_view) => panic!("{path}: {from_tree:?} / {from_view:?}"),
            }
            compared += 1;
        }
    }
    assert!(compared >= 150, "{compared} reviews compared");
}

/// The files of `folder`, sorted; none when it does not exist.
fn files(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
    files.sort();
    files
}

/// An AdmissionReview of `operation` on `object` (on UPDATE, the object is its own old object).
fn review_of(object: &Value, operation: &str) -> Vec<u8> {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let (group, version) = match text("/apiVersion").split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", text("/apiVersion")),
    };
    let kind = text("/kind");
    let mut request = serde_json::json!({
        "uid": "u", "operation": operation, "userInfo": {"username": "alice"},
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version,
                     "resource": format!("{}s", kind.to_lowercase())},
        "name": text("/metadata/name"), "namespace": text("/metadata/namespace"),
        "object": object,
    });
    if operation == "UPDATE" {
        request["oldObject"] = object.clone();
    }
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request,
    }))
    .unwrap()
}

#[test]
fn serve_reads_views_only_where_every_rule_reads_them() {
    for views in [
        engine(&["tests/fixtures/bench/policies/pod-security.yaml"]),
        engine(&["bench/fixtures/vap", "bench/fixtures/vap-small"]),
        Engine::builtin(),
        engine(&["tests/fixtures/bench/policies", "bench/fixtures/vap"]),
    ] {
        assert_eq!(views.object_form(Endpoint::Validate), ObjectForm::View);
        assert_eq!(views.object_form(Endpoint::Mutate), ObjectForm::Tree);
    }
    let gatekeeper = engine(&[
        "tests/fixtures/gatekeeper/allowed-registries/templates",
        "tests/fixtures/gatekeeper/allowed-registries/constraints",
    ]);
    assert_eq!(gatekeeper.object_form(Endpoint::Validate), ObjectForm::View);
    let expansion = engine(&[
        "tests/fixtures/gatekeeper/expansion/templates",
        "tests/fixtures/gatekeeper/expansion/constraints",
        "tests/fixtures/gatekeeper/expansion/expansion",
    ]);
    assert_eq!(expansion.object_form(Endpoint::Validate), ObjectForm::Tree);
}

/// Pod Security, and it with the small-Pod load bench's admission policy, read a Pod's or a
/// Namespace's view alone: no tree is built for it. (An expression that fails is worded by the interpreter,
/// which reads the tree: bench/fixtures/vap's `object.metadata.name` on a Pod without a name.)
#[test]
fn pods_and_namespaces_are_read_without_building_a_tree() {
    for policies in [
        &["tests/fixtures/bench/policies/pod-security.yaml"][..],
        &[
            "tests/fixtures/bench/policies/pod-security.yaml",
            "bench/fixtures/vap-small",
        ],
        &["tests/fixtures/bench/policies", "bench/fixtures/vap-small"],
    ] {
        let engine = engine(policies);
        assert_eq!(engine.object_form(Endpoint::Validate), ObjectForm::View);
        let context = EvalContext::new(Endpoint::Validate);
        let (mut pods, mut namespaces) = (0, 0);
        for (path, body) in reviews() {
            let request = parsed(&body, ObjectForm::View).request;
            let kind = request.kind.kind.as_str();
            if !matches!(kind, "Pod" | "Namespace") || request.operation == Operation::Delete {
                continue;
            }
            let decision = engine.evaluate(&request, &context);
            assert!(decision.is_ok(), "{path}: {decision:?}");
            for object in [&request.object, &request.old_object].into_iter().flatten() {
                assert!(
                    object.tree_if_built().is_none(),
                    "{policies:?}, {path}: a tree was built"
                );
            }
            let counted = if kind == "Pod" {
                &mut pods
            } else {
                &mut namespaces
            };
            *counted += usize::from(request.object.is_some());
        }
        assert!(
            pods >= 10 && namespaces >= 5,
            "{pods} pods, {namespaces} namespaces"
        );
    }
}

/// Through the router: a Pod Security set answers from views.
#[tokio::test]
async fn the_router_answers_from_views() {
    let engine = engine(&["tests/fixtures/bench/policies/pod-security.yaml"]);
    let router = webhook_router(AppState::new(engine, RequestSettings::default()));
    let body =
        std::fs::read(root().join("tests/fixtures/reviews/pod-create-privileged.json")).unwrap();
    let response = router
        .clone()
        .oneshot(post_json("/validate", body.clone()))
        .await
        .unwrap();
    let answer: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    let expected = parse_review(&body).unwrap().request.uid;
    assert_eq!(answer["response"]["uid"], expected.as_str());
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("[pod-security/enforce] violates PodSecurity \"restricted:latest\": "),
        "{message}"
    );
    assert!(message.contains("privileged (container"), "{message}");
}
