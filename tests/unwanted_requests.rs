//! `serve` decodes a request's objects only when `Engine::wants` says, from the envelope and
//! the labels of its namespace, that some rule may act on it, and an UPDATE's `oldObject` only
//! when one of those rules may read it (`Engine::wanted_objects`). Here, for every policy set
//! of the repository and every object of its fixtures under each operation, in namespaces
//! with labels that the policies' namespace selectors and Pod Security read, a request the
//! engine does not want must be one that `Engine::evaluate` (given the objects and the same
//! namespaces) allows unchanged, with nothing to report or time; an UPDATE whose `oldObject`
//! is not wanted must be decided alike without it; and the envelope-first parse must give the
//! request the full parse gives, without what it skipped.

use std::collections::HashMap;
use std::path::PathBuf;

use portcullis::admission::{AdmissionRequest, WantedObjects, parse_review, parse_review_for};
use portcullis::engine::{
    Decision, Endpoint, Engine, EvalContext, Labels, NoNamespaces, StaticNamespaces,
};
use serde_json::{Value, json};

fn root(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn files(folder: &str, extension: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root(folder))
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect();
    found.sort();
    found
}

/// Every policy set the repository has: the built-in one, the examples, the bench sets, each
/// of their files alone and each admission-policy fixture that loads alone.
fn engines() -> Vec<(String, Engine)> {
    let mut engines = vec![("builtin".to_owned(), Engine::builtin())];
    for folder in [
        "examples/policies",
        "tests/fixtures/bench/policies",
        "bench/fixtures/vap",
        "bench/fixtures/vap-small",
        "bench/fixtures/vap-library",
        "bench/fixtures/vap-variables",
        "bench/fixtures/heavy",
    ] {
        let engine = Engine::load(&[root(folder)]).unwrap_or_else(|e| panic!("{folder}: {e}"));
        engines.push((folder.to_owned(), engine));
    }
    let folder = "tests/fixtures/unwanted/namespaces";
    engines.push((folder.to_owned(), Engine::load(&[root(folder)]).unwrap()));
    for folder in ["examples/policies", "tests/fixtures/bench/policies", folder] {
        for file in files(folder, "yaml") {
            let engine = Engine::load(std::slice::from_ref(&file)).unwrap();
            engines.push((file.display().to_string(), engine));
        }
    }
    let mut loaded_alone = 0;
    for file in files("tests/fixtures/admission_policies", "yaml") {
        if let Ok(engine) = Engine::load(std::slice::from_ref(&file)) {
            engines.push((file.display().to_string(), engine));
            loaded_alone += 1;
        }
    }
    assert!(loaded_alone >= 10, "only {loaded_alone} fixtures loaded");
    // Each Gatekeeper scenario's templates, constraints and ExpansionTemplates, alone and with a
    // Config that excludes namespaces from the webhook.
    let config = root("tests/fixtures/unwanted/gatekeeper-config");
    let mut scenarios = 0;
    for scenario in std::fs::read_dir(root("tests/fixtures/gatekeeper")).unwrap() {
        let scenario = scenario.unwrap().path();
        let (templates, constraints) = (scenario.join("templates"), scenario.join("constraints"));
        if !templates.is_dir() || !constraints.is_dir() {
            continue;
        }
        let name = scenario.display().to_string();
        let mut policies = vec![templates, constraints];
        if scenario.join("expansion").is_dir() {
            policies.push(scenario.join("expansion"));
        }
        let alone = Engine::load(&policies).unwrap_or_else(|e| panic!("{name}: {e}"));
        engines.push((name.clone(), alone));
        policies.push(config.clone());
        let configured =
            Engine::load(&policies).unwrap_or_else(|e| panic!("{name} with a Config: {e}"));
        engines.push((format!("{name} with a Config"), configured));
        scenarios += 1;
    }
    assert!(scenarios >= 10, "only {scenarios} Gatekeeper scenarios");
    // Rules that read an UPDATE's oldObject, one way per file.
    for file in files("tests/fixtures/admission_policies/old-object", "yaml") {
        let engine = Engine::load(std::slice::from_ref(&file)).unwrap();
        engines.push((file.display().to_string(), engine));
    }
    engines
}

/// The request of `object` under `operation`, as the apiserver would send it.
fn request_of(object: &Value, operation: &str, user: &str) -> Vec<(&'static str, Value)> {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or("Thing");
    let resource = portcullis::engine::matching::plural_resource(kind);
    // The apiserver names a Namespace updated or deleted in `namespace` too.
    let namespace = match (kind, operation) {
        ("Namespace", "CREATE") => Value::Null,
        ("Namespace", _) => object["metadata"]["name"].clone(),
        _ => object["metadata"]["namespace"].clone(),
    };
    let (new, old) = match operation {
        "CREATE" | "CONNECT" => (object.clone(), Value::Null),
        "UPDATE" => (object.clone(), object.clone()),
        _ => (Value::Null, object.clone()),
    };
    vec![
        ("uid", json!("u")),
        (
            "kind",
            json!({"group": group, "version": version, "kind": kind}),
        ),
        (
            "resource",
            json!({"group": group, "version": version, "resource": resource}),
        ),
        ("name", object["metadata"]["name"].clone()),
        ("namespace", namespace),
        ("operation", json!(operation)),
        (
            "userInfo",
            json!({"username": user, "groups": ["system:authenticated"]}),
        ),
        ("object", new),
        ("oldObject", old),
    ]
}

/// The namespaces the requests are in, with labels that the fixtures' namespace selectors and
/// Pod Security read; `nowhere`, where some objects are also put, is unknown.
fn namespaces() -> StaticNamespaces {
    let mut namespaces = StaticNamespaces::default();
    for (name, labels) in [
        ("prod", &[("environment", "prod"), ("team", "payments")][..]),
        ("test", &[("environment", "test")]),
        ("dev", &[]),
        ("strict", &[("environment", "")]),
        (
            "relaxed",
            &[
                ("pod-security.kubernetes.io/warn", "privileged"),
                ("pod-security.kubernetes.io/audit", "privileged"),
            ],
        ),
        (
            "open",
            &[
                ("pod-security.kubernetes.io/enforce", "privileged"),
                ("pod-security.kubernetes.io/warn", "privileged"),
                ("pod-security.kubernetes.io/audit", "privileged"),
                ("team", "payments"),
            ],
        ),
        (
            "misspelt",
            &[
                ("pod-security.kubernetes.io/warn", "privilged"),
                ("pod-security.kubernetes.io/audit", "privileged"),
            ],
        ),
        ("kube-system", &[]),
    ] {
        let mut labels: Labels = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        labels.insert("kubernetes.io/metadata.name".to_owned(), name.to_owned());
        namespaces.insert(name, labels);
    }
    namespaces
}

/// The namespaces objects are also put in, besides their own: each of [`namespaces`] and one
/// it does not know.
const OTHER_NAMESPACES: [&str; 8] = [
    "prod",
    "test",
    "strict",
    "relaxed",
    "open",
    "misspelt",
    "kube-system",
    "nowhere",
];

/// The objects of the policy fixtures, with their files.
fn fixture_objects() -> Vec<(PathBuf, Value)> {
    let mut objects = Vec::new();
    for folder in [
        "tests/fixtures/policies/objects",
        "tests/fixtures/admission_policies/objects",
        "tests/fixtures/unwanted/objects",
    ] {
        for file in files(folder, "yaml") {
            let text = std::fs::read_to_string(&file).unwrap();
            let object: Value = serde_norway::from_str(&text).unwrap();
            objects.push((file, object));
        }
    }
    objects
}

/// The review of a request's fields in the order given.
fn review_in_order(fields: &[(&str, Value)]) -> Vec<u8> {
    let members: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{}:{value}", json!(name)))
        .collect();
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{{}}}}}"#,
        members.join(",")
    )
    .into_bytes()
}

/// A body, and whether its request's fields are in the apiserver's order (envelope first).
struct Body {
    name: String,
    bytes: Vec<u8>,
    apiserver_order: bool,
    /// The request this is of, in whichever namespace it is put.
    request_of: String,
}

/// Bodies: the review fixtures as they are, and every object fixture under each operation,
/// by two users, in the apiserver's order and with the fields sorted by name (`object` before
/// `operation`).
fn bodies() -> Vec<Body> {
    let mut bodies = Vec::new();
    for folder in [
        "tests/fixtures/reviews",
        "examples/reviews",
        "bench/fixtures",
    ] {
        for file in files(folder, "json") {
            bodies.push(Body {
                name: file.display().to_string(),
                bytes: std::fs::read(&file).unwrap(),
                apiserver_order: true,
                request_of: file.display().to_string(),
            });
        }
    }
    bodies.push(Body {
        name: "pod-10kb".to_owned(),
        bytes: std::fs::read(root("tests/fixtures/bench/pod-10kb.json")).unwrap(),
        apiserver_order: true,
        request_of: "pod-10kb".to_owned(),
    });
    for (file, object) in fixture_objects() {
        let what = file.display().to_string();
        for operation in ["CREATE", "UPDATE", "DELETE", "CONNECT"] {
            push_bodies(&mut bodies, &object, operation, &what, "");
            // A namespaced object also in the other namespaces, which namespace filters,
            // selectors, exemptions and Pod Security labels name.
            if object["metadata"]["namespace"].is_string() {
                for namespace in OTHER_NAMESPACES {
                    let mut moved = object.clone();
                    moved["metadata"]["namespace"] = json!(namespace);
                    push_bodies(&mut bodies, &moved, operation, &what, namespace);
                }
            }
        }
    }
    bodies
}

/// The reviews of `object` (put in `namespace`, when not empty) under `operation` by two
/// users, in the apiserver's order and with the fields sorted by name.
fn push_bodies(
    bodies: &mut Vec<Body>,
    object: &Value,
    operation: &str,
    what: &str,
    namespace: &str,
) {
    for user in ["jane@example.com", "system:serviceaccount:kube-system:ci"] {
        let mut fields = request_of(object, operation, user);
        let request = format!("{what} {operation} by {user}");
        let name = if namespace.is_empty() {
            request.clone()
        } else {
            format!("{request} in {namespace}")
        };
        bodies.push(Body {
            name: name.clone(),
            bytes: review_in_order(&fields),
            apiserver_order: true,
            request_of: request.clone(),
        });
        fields.sort_by_key(|(field, _)| *field);
        bodies.push(Body {
            name: format!("{name}, fields sorted"),
            bytes: review_in_order(&fields),
            apiserver_order: false,
            request_of: request,
        });
    }
}

fn without_objects(request: &AdmissionRequest) -> AdmissionRequest {
    AdmissionRequest {
        object: None,
        old_object: None,
        ..request.clone()
    }
}

#[test]
fn what_an_engine_does_not_want_it_allows_unchanged() {
    let engines = engines();
    let bodies = bodies();
    let namespaces = namespaces();
    let (mut wanted, mut unwanted) = (0, 0);
    // Per policy set, request (in whichever namespace) and endpoint: whether it was wanted in
    // some namespace, and not in some other.
    let mut by_namespace: HashMap<(&str, &str, Endpoint), (bool, bool)> = HashMap::new();
    for (policies, engine) in &engines {
        for Body {
            name,
            bytes: body,
            apiserver_order,
            request_of,
        } in &bodies
        {
            let full = parse_review(body).unwrap_or_else(|e| panic!("{name}: {e}"));
            for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                let envelope = without_objects(&full.request);
                let wants = engine.wants(&envelope, endpoint, &namespaces);
                let seen = by_namespace
                    .entry((policies, request_of, endpoint))
                    .or_default();
                if wants {
                    seen.0 = true;
                } else {
                    seen.1 = true;
                }
                let read = parse_review_for(body, &|request| {
                    engine.wanted_objects(request, endpoint, &namespaces)
                })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
                let has_objects =
                    full.request.object.is_some() || full.request.old_object.is_some();
                // Skipped only when not wanted; in the apiserver's order, always then.
                assert!(!read.objects_skipped || (!wants && has_objects));
                if *apiserver_order {
                    assert_eq!(
                        read.objects_skipped,
                        !wants && has_objects,
                        "{policies} / {name} / {endpoint:?}"
                    );
                }
                if !read.objects_skipped && !read.old_object_skipped {
                    assert_eq!(
                        serde_json::to_value(&read.request).unwrap(),
                        serde_json::to_value(&full.request).unwrap(),
                        "{policies} / {name}: a request whose objects are not skipped is read whole"
                    );
                }
                if wants {
                    wanted += 1;
                    continue;
                }
                unwanted += 1;
                if read.objects_skipped {
                    assert_eq!(
                        serde_json::to_value(&read.request).unwrap(),
                        serde_json::to_value(&envelope).unwrap(),
                        "{policies} / {name}: the envelope is read as the full parse reads it"
                    );
                }
                let context = EvalContext::new(endpoint).with_namespaces(&namespaces);
                let decision = engine
                    .evaluate(&full.request, &context)
                    .unwrap_or_else(|e| panic!("{policies} / {name} / {endpoint:?}: {e}"));
                assert!(
                    decision.violations.is_empty()
                        && decision.warnings.is_empty()
                        && decision.audit_annotations.is_empty()
                        && decision.patch.is_none()
                        && decision.outcomes.is_empty()
                        && decision.timings.is_empty(),
                    "{policies} / {name} / {endpoint:?}: not wanted, but evaluating it gave {decision:?}"
                );
            }
        }
    }
    // Both sides are exercised: most pairs are not wanted (a policy set names few kinds),
    // and many are; and for many requests the namespace they are in decides.
    let decided_by_namespace = by_namespace
        .values()
        .filter(|(wanted, unwanted)| *wanted && *unwanted)
        .count();
    assert!(
        wanted >= 200 && unwanted >= 200 && decided_by_namespace >= 100,
        "{wanted} wanted, {unwanted} not; {decided_by_namespace} requests wanted in some \
         namespaces and not in others"
    );
    eprintln!(
        "{wanted} wanted, {unwanted} not; {decided_by_namespace} requests wanted in some \
         namespaces and not in others"
    );
}

#[test]
fn a_field_after_a_skipped_object_that_changes_the_answer_reads_the_body_again() {
    // Pod Security alone: it wants a request by its resource.
    let engine = Engine::load(&[root("tests/fixtures/bench/policies/pod-security.yaml")]).unwrap();
    // A field of the envelope after the object: until it is read, the envelope is not one
    // Pod Security wants.
    let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "nginx:1"}]}});
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
            "uid":"u","kind":{{"version":"v1","kind":"ConfigMap"}},
            "resource":{{"version":"v1","resource":"configmaps"}},"operation":"CREATE",
            "object":{object},
            "kind":{{"version":"v1","kind":"Pod"}}}}}}"#
    );
    // A duplicate field is refused whichever order it comes in.
    let error = parse_review_for(body.as_bytes(), &|r| {
        engine.wanted_objects(r, Endpoint::Validate, &NoNamespaces)
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("duplicate field `kind`"), "{error}");

    let late_resource = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
            "uid":"u","kind":{{"version":"v1","kind":"Pod"}},"operation":"CREATE",
            "object":{object},
            "resource":{{"version":"v1","resource":"pods"}}}}}}"#
    );
    let read = parse_review_for(late_resource.as_bytes(), &|r| {
        engine.wanted_objects(r, Endpoint::Validate, &NoNamespaces)
    })
    .unwrap();
    assert!(!read.objects_skipped);
    assert_eq!(read.request.object.as_deref(), Some(&object));
    let decision = engine
        .evaluate(&read.request, &EvalContext::new(Endpoint::Validate))
        .unwrap();
    assert!(!decision.violations.is_empty(), "hostNetwork is refused");

    // An object that is not of the request's kind is read whole, for the engine to refuse.
    let mismatched = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
            "uid":"u","kind":{{"version":"v1","kind":"ConfigMap"}},
            "resource":{{"version":"v1","resource":"configmaps"}},"operation":"CREATE",
            "userInfo":{{}},"object":{object}}}}}"#
    );
    let read = parse_review_for(mismatched.as_bytes(), &|r| {
        engine.wanted_objects(r, Endpoint::Validate, &NoNamespaces)
    })
    .unwrap();
    assert!(!read.objects_skipped);
    let error = engine
        .evaluate(&read.request, &EvalContext::new(Endpoint::Validate))
        .unwrap_err();
    assert!(
        error.to_string().contains("the object is v1 Pod"),
        "{error}"
    );
    let matching = mismatched.replace(r#""kind":"Pod""#, r#""kind":"ConfigMap""#);
    let read = parse_review_for(matching.as_bytes(), &|r| {
        engine.wanted_objects(r, Endpoint::Validate, &NoNamespaces)
    })
    .unwrap();
    assert!(read.objects_skipped);
}

/// `object` with `metadata.labels` set to `labels` (removed when null).
fn labelled(object: &Value, labels: Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        match labels {
            Value::Null => metadata.remove("labels"),
            labels => metadata.insert("labels".to_owned(), labels),
        };
    }
    object
}

/// UPDATEs of `object` with old objects a rule reading `oldObject` would see differently: the
/// same object; an old one whose labels alone match selectors (`frozen`, and the object's
/// own); an old one with its spec changed (replicas, a container's image) and no labels.
fn updates_of(object: &Value) -> Vec<(&'static str, Value, Value)> {
    let mut old_labels = object["metadata"]["labels"].clone();
    if !old_labels.is_object() {
        old_labels = json!({});
    }
    old_labels["frozen"] = json!("true");
    let mut changed = labelled(object, Value::Null);
    if let Some(spec) = changed["spec"].as_object_mut() {
        spec.insert("replicas".to_owned(), json!(7));
        if let Some(container) = spec
            .get_mut("containers")
            .and_then(|c| c.get_mut(0))
            .and_then(Value::as_object_mut)
        {
            container.insert("image".to_owned(), json!("registry.example/old:1"));
            container.insert("securityContext".to_owned(), json!({"privileged": true}));
        }
    }
    vec![
        ("the same old object", object.clone(), object.clone()),
        (
            "only the old object labelled",
            labelled(object, Value::Null),
            labelled(object, old_labels),
        ),
        ("an old object with another spec", object.clone(), changed),
    ]
}

/// The decision (timings aside) with the per-policy outcomes the metrics count, or the error.
fn decided(
    engine: &Engine,
    request: &AdmissionRequest,
    endpoint: Endpoint,
) -> Result<(Decision, String), String> {
    match engine.evaluate(request, &EvalContext::new(endpoint)) {
        Ok(decision) => {
            let outcomes = format!("{:?}", decision.outcomes);
            Ok((decision, outcomes))
        }
        Err(error) => Err(error.to_string()),
    }
}

#[test]
fn an_old_object_no_rule_reads_is_not_decoded_and_not_missed() {
    let engines = engines();
    let mut bodies = Vec::new();
    for (file, object) in fixture_objects() {
        for (how, new, old) in updates_of(&object) {
            let mut fields = request_of(&new, "UPDATE", "jane@example.com");
            fields.retain(|(field, _)| *field != "oldObject");
            fields.push(("oldObject", old));
            let name = format!("{}, {how}", file.display());
            bodies.push((name.clone(), review_in_order(&fields), true));
            fields.sort_by_key(|(field, _)| *field);
            bodies.push((
                format!("{name}, fields sorted"),
                review_in_order(&fields),
                false,
            ));
        }
    }
    let (mut object_only, mut both) = (0, 0);
    let mut differed_without_old = 0;
    for (policies, engine) in &engines {
        for (name, body, apiserver_order) in &bodies {
            let full = parse_review(body).unwrap_or_else(|e| panic!("{name}: {e}"));
            let without_old = AdmissionRequest {
                old_object: None,
                ..full.request.clone()
            };
            for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
                let wanted =
                    engine.wanted_objects(&without_objects(&full.request), endpoint, &NoNamespaces);
                let read =
                    parse_review_for(body, &|r| engine.wanted_objects(r, endpoint, &NoNamespaces))
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                let case = format!("{policies} / {name} / {endpoint:?}");
                let decided_whole = decided(engine, &full.request, endpoint);
                if decided_whole != decided(engine, &without_old, endpoint) {
                    differed_without_old += 1;
                }
                match wanted {
                    WantedObjects::Neither => {}
                    WantedObjects::Object => {
                        object_only += 1;
                        // Another order may be read whole again, when the envelope was not
                        // complete at the objects.
                        if *apiserver_order || read.old_object_skipped {
                            assert_eq!(read.request.old_object, None, "{case}");
                            assert!(read.old_object_skipped, "{case}");
                        }
                        assert_eq!(read.request.object, full.request.object, "{case}");
                        assert_eq!(
                            decided(engine, &read.request, endpoint),
                            decided_whole,
                            "{case}: no rule was to read oldObject, but it changed the decision"
                        );
                    }
                    WantedObjects::Both => {
                        both += 1;
                        assert!(!read.objects_skipped && !read.old_object_skipped, "{case}");
                        assert_eq!(
                            serde_json::to_value(&read.request).unwrap(),
                            serde_json::to_value(&full.request).unwrap(),
                            "{case}"
                        );
                    }
                }
            }
        }
    }
    // Both answers are exercised, and the old objects are ones some rules read.
    assert!(
        object_only >= 100 && both >= 50 && differed_without_old >= 20,
        "{object_only} with the object alone, {both} with both, \
         {differed_without_old} decided otherwise without oldObject"
    );
}

/// A Deployment in a namespace the Config excludes from the webhook is not wanted by
/// constraints that match Deployments everywhere (so its objects are not decoded), and is
/// allowed unchanged; a Namespace named like an excluded one is still judged by its object.
#[test]
fn a_namespace_the_config_excludes_from_the_webhook_is_not_wanted() {
    let scenario = root("tests/fixtures/gatekeeper/required-labels");
    let policies = [scenario.join("templates"), scenario.join("constraints")];
    let alone = Engine::load(&policies).unwrap();
    let mut with_config = policies.to_vec();
    with_config.push(root("tests/fixtures/unwanted/gatekeeper-config"));
    let configured = Engine::load(&with_config).unwrap();
    let deployment: Value = serde_norway::from_str(
        &std::fs::read_to_string(scenario.join("objects/deployment-unlabelled.yaml")).unwrap(),
    )
    .unwrap();
    let envelope = |namespace: &str| {
        let mut moved = deployment.clone();
        moved["metadata"]["namespace"] = json!(namespace);
        parse_review(&review_in_order(&request_of(
            &moved,
            "CREATE",
            "jane@example.com",
        )))
        .unwrap()
        .request
    };
    let namespaces = namespaces();
    for namespace in ["kube-system", "test"] {
        let request = envelope(namespace);
        assert!(alone.wants(&without_objects(&request), Endpoint::Validate, &namespaces));
        assert!(!configured.wants(&without_objects(&request), Endpoint::Validate, &namespaces));
        let decision = configured
            .evaluate(&request, &EvalContext::new(Endpoint::Validate))
            .unwrap();
        assert!(decision.violations.is_empty(), "{namespace}: {decision:?}");
    }
    for namespace in ["prod", "dev"] {
        let request = envelope(namespace);
        assert!(configured.wants(&without_objects(&request), Endpoint::Validate, &namespaces));
        let decision = configured
            .evaluate(&request, &EvalContext::new(Endpoint::Validate))
            .unwrap();
        assert_eq!(decision.violations.len(), 1, "{namespace}: {decision:?}");
    }
    let namespace: Value = serde_norway::from_str(
        &std::fs::read_to_string(scenario.join("objects/ns-unowned.yaml")).unwrap(),
    )
    .unwrap();
    let mut kube_namespace = namespace.clone();
    kube_namespace["metadata"]["name"] = json!("kube-public");
    for (object, violations) in [(&namespace, 1), (&kube_namespace, 0)] {
        let request = parse_review(&review_in_order(&request_of(object, "UPDATE", "jane")))
            .unwrap()
            .request;
        assert!(configured.wants(&without_objects(&request), Endpoint::Validate, &namespaces));
        let decision = configured
            .evaluate(&request, &EvalContext::new(Endpoint::Validate))
            .unwrap();
        assert_eq!(decision.violations.len(), violations, "{decision:?}");
    }
}
