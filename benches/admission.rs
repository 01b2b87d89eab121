//! parse → decide → respond, for the built-in rules: the pure pipeline and the whole router
//! in-process (no socket). No timing assertions: read the reports.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use portcullis::admission::{
    ObjectForm, encode_review, parse_review, parse_review_as, parse_review_for,
};
use portcullis::engine::{Endpoint, Engine, EvalContext, NoNamespaces};
use portcullis::kubernetes::defaulting::apply_defaults;
use portcullis::server::{AppState, RequestSettings, webhook_router};
use tower::ServiceExt;

#[path = "../src/allocator.rs"]
mod allocator;

/// The binary's allocator (src/main.rs), so the figures are the server's.
#[global_allocator]
static ALLOCATOR: allocator::MiMalloc = allocator::MiMalloc;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/reviews/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A review under bench/fixtures (the bodies `make bench-load` sends).
fn bench_fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/bench/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pipeline(c: &mut Criterion) {
    let engine = Engine::builtin();
    let mut group = c.benchmark_group("pipeline");
    // The 1 KB ConfigMap is a request no built-in rule wants.
    for (name, endpoint) in [
        ("pod-create-compliant.json", Endpoint::Validate),
        ("pod-create-compliant.json", Endpoint::Mutate),
        ("pod-create-privileged.json", Endpoint::Validate),
        ("deployment-update.json", Endpoint::Validate),
        ("configmap-review.json", Endpoint::Validate),
        ("configmap-review.json", Endpoint::Mutate),
    ] {
        let body = if name.starts_with("configmap") {
            bench_fixture(name)
        } else {
            fixture(name)
        };
        group.throughput(criterion::Throughput::Bytes(body.len() as u64));
        // As `serve` does: the objects decoded only for a request some rule wants.
        group.bench_function(format!("{}/{}", endpoint.name(), name), |b| {
            b.iter(|| {
                let wants = |request: &_| engine.wanted_objects(request, endpoint, &NoNamespaces);
                let review = parse_review_for(black_box(&body), &wants).unwrap();
                let decision = if review.objects_skipped {
                    Default::default()
                } else {
                    let context = EvalContext::new(endpoint);
                    engine.evaluate(&review.request, &context).unwrap()
                };
                let response = decision.to_response(&review.request.uid);
                black_box(encode_review(review.version, &response))
            })
        });
    }
    group.finish();
    // The ConfigMap parsed whole, and envelope first under the built-in set (which does not
    // want it), side by side.
    let body = bench_fixture("configmap-review.json");
    let mut group = c.benchmark_group("parse");
    group.bench_function("whole/configmap", |b| {
        b.iter(|| black_box(parse_review(black_box(&body)).unwrap()))
    });
    group.bench_function("envelope-first/configmap", |b| {
        let wants = |request: &_| engine.wanted_objects(request, Endpoint::Validate, &NoNamespaces);
        b.iter(|| black_box(parse_review_for(black_box(&body), &wants).unwrap()))
    });
    // A Deployment UPDATE the built-in set wants but reads no oldObject of: whole, and as
    // `serve` parses it (the oldObject skipped).
    let body = fixture("deployment-update.json");
    group.bench_function("whole/deployment-update", |b| {
        b.iter(|| black_box(parse_review(black_box(&body)).unwrap()))
    });
    group.bench_function("envelope-first/deployment-update", |b| {
        let wants = |request: &_| engine.wanted_objects(request, Endpoint::Validate, &NoNamespaces);
        assert!(parse_review_for(&body, &wants).unwrap().old_object_skipped);
        b.iter(|| black_box(parse_review_for(black_box(&body), &wants).unwrap()))
    });
    group.finish();
}

fn router(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = webhook_router(AppState::new(Engine::builtin(), RequestSettings::default()));
    for (name, body) in [
        (
            "pod-create-compliant.json",
            fixture("pod-create-compliant.json"),
        ),
        (
            "configmap-review.json",
            bench_fixture("configmap-review.json"),
        ),
    ] {
        let body = axum::body::Bytes::from(body);
        c.bench_function(&format!("router/validate/{name}"), |b| {
            b.to_async(&runtime).iter(|| async {
                let request = axum::http::Request::post("/validate")
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(body.clone()))
                    .unwrap();
                let response = app.clone().oneshot(request).await.unwrap();
                black_box(response.status())
            })
        });
    }
}

/// A 10 KB Pod CREATE under the "standard set": Pod Security restricted (enforce, warn,
/// audit), 10 native validation rules and 5 defaults (tests/fixtures/bench/policies).
fn standard_set(c: &mut Criterion) {
    let policies = format!(
        "{}/tests/fixtures/bench/policies",
        env!("CARGO_MANIFEST_DIR")
    );
    let native = format!("{policies}/native.yaml");
    let standard = portcullis::engine::Engine::load(&[policies.into()]).expect("bench policies");
    let native_only = portcullis::engine::Engine::load(&[native.into()]).expect("native policy");
    let vap = format!("{}/bench/fixtures/vap", env!("CARGO_MANIFEST_DIR"));
    let vap_only = portcullis::engine::Engine::load(&[vap.into()]).expect("bench VAP");
    let library = format!("{}/bench/fixtures/vap-library", env!("CARGO_MANIFEST_DIR"));
    let library_only = portcullis::engine::Engine::load(&[library.into()]).expect("library VAP");
    let with_variables = format!(
        "{}/bench/fixtures/vap-variables",
        env!("CARGO_MANIFEST_DIR")
    );
    let variables_only =
        portcullis::engine::Engine::load(&[with_variables.into()]).expect("variables VAP");
    let body = std::fs::read(format!(
        "{}/tests/fixtures/bench/pod-10kb.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let review = parse_review(&body).unwrap();
    let mut group = c.benchmark_group("engine");
    for (name, engine) in [
        ("standard-set", &standard),
        ("native-only", &native_only),
        ("vap-10-validations", &vap_only),
        ("vap-library", &library_only),
        ("vap-variables", &variables_only),
    ] {
        for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
            let context = EvalContext::new(endpoint);
            let decision = engine.evaluate(&review.request, &context).unwrap();
            assert!(decision.allowed(), "{:?}", decision.violations);
            group.bench_function(format!("{}/{name}/pod-10kb", endpoint.name()), |b| {
                b.iter(|| {
                    black_box(
                        engine
                            .evaluate(black_box(&review.request), &context)
                            .unwrap(),
                    )
                })
            });
        }
    }
    // The same policy on the interpreter alone (`--cel-evaluator interpreter`), side by side.
    let context = EvalContext::new(Endpoint::Validate);
    portcullis::expressions::set_compiled_evaluation(false);
    group.bench_function("validate/vap-10-validations-interpreter/pod-10kb", |b| {
        b.iter(|| {
            black_box(
                vap_only
                    .evaluate(black_box(&review.request), &context)
                    .unwrap(),
            )
        })
    });
    group.bench_function("validate/vap-library-interpreter/pod-10kb", |b| {
        b.iter(|| {
            black_box(
                library_only
                    .evaluate(black_box(&review.request), &context)
                    .unwrap(),
            )
        })
    });
    group.bench_function("validate/vap-variables-interpreter/pod-10kb", |b| {
        b.iter(|| {
            black_box(
                variables_only
                    .evaluate(black_box(&review.request), &context)
                    .unwrap(),
            )
        })
    });
    portcullis::expressions::set_compiled_evaluation(true);
    group.bench_function("parse/pod-10kb", |b| {
        b.iter(|| black_box(parse_review(black_box(&body)).unwrap()))
    });
    // As `serve` reads it (its objects in object views), and from a tree.
    let form = standard.object_form(Endpoint::Validate);
    assert_eq!(form, ObjectForm::View);
    for (name, form) in [("", form), ("-from-tree", ObjectForm::Tree)] {
        group.bench_function(
            format!("pipeline/validate/standard-set{name}/pod-10kb"),
            |b| b.iter(|| black_box(decide_validate(&standard, black_box(&body), form))),
        );
    }
    group.finish();
}

/// The apiserver's defaulting of the same 10 KB Pod (`portcullis::kubernetes::defaulting`): alone (the
/// object's clone is set up outside the measurement), and decode + default (the review parsed,
/// then its object defaulted), as `check` and a typed round-trip would pay it.
fn defaulting(c: &mut Criterion) {
    let body = std::fs::read(format!(
        "{}/tests/fixtures/bench/pod-10kb.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let review = parse_review(&body).unwrap();
    let kind = review.request.kind.clone();
    let object = review.request.object.clone().expect("the Pod");
    let mut group = c.benchmark_group("default");
    group.throughput(criterion::Throughput::Bytes(body.len() as u64));
    group.bench_function("pod-10kb", |b| {
        b.iter_batched(
            || object.clone(),
            |mut object| {
                apply_defaults(black_box(&kind), &mut object);
                object
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("decode+default/pod-10kb", |b| {
        b.iter(|| {
            let mut review = parse_review(black_box(&body)).unwrap();
            if let Some(object) = review.request.object.as_mut() {
                apply_defaults(&review.request.kind, object);
            }
            black_box(review)
        })
    });
    group.finish();
}

/// A review at `/validate` as `serve` decides it, envelope first, its objects decoded in
/// `form`: the encoded response.
fn decide_validate(engine: &Engine, body: &[u8], form: ObjectForm) -> Vec<u8> {
    let wants = |request: &_| engine.wanted_objects(request, Endpoint::Validate, &NoNamespaces);
    let review = parse_review_as(body, &wants, form).unwrap();
    let decision = if review.objects_skipped {
        Default::default()
    } else {
        let context = EvalContext::new(Endpoint::Validate);
        engine.evaluate(&review.request, &context).unwrap()
    };
    let response = decision.to_response(&review.request.uid);
    encode_review(review.version, &response)
}

/// #14's small Pod (bench/fixtures/pod-small-review.json) as `serve` decides it, envelope
/// first: under no rules (the load bench's floor), under Pod Security restricted alone, and
/// under Pod Security restricted + four CEL validations (the load bench's `small-pss-cel`),
/// each with its objects read from an object view, as `serve` reads them for such sets, and
/// from a tree; and the parts of the latter. Then the 10 KB Pod under Pod Security alone,
/// from a view and from a tree.
fn small_pod(c: &mut Criterion) {
    let root = env!("CARGO_MANIFEST_DIR");
    let pod_security: std::path::PathBuf =
        format!("{root}/tests/fixtures/bench/policies/pod-security.yaml").into();
    let policies = [
        pod_security.clone(),
        format!("{root}/bench/fixtures/vap-small").into(),
    ];
    let pss_cel = Engine::load(&policies).expect("small-Pod policies");
    let pss = Engine::load(&[pod_security]).expect("Pod Security policy");
    assert_eq!(pss.object_form(Endpoint::Validate), ObjectForm::View);
    let floor = Engine::empty();
    let body = bench_fixture("pod-small-review.json");
    let mut group = c.benchmark_group("small-pod");
    assert_eq!(pss_cel.object_form(Endpoint::Validate), ObjectForm::View);
    for (name, engine, form) in [
        ("floor", &floor, ObjectForm::Tree),
        ("pss", &pss, ObjectForm::View),
        ("pss-from-tree", &pss, ObjectForm::Tree),
        ("pss-cel", &pss_cel, ObjectForm::View),
        ("pss-cel-from-tree", &pss_cel, ObjectForm::Tree),
    ] {
        group.bench_function(format!("pipeline/{name}"), |b| {
            b.iter(|| black_box(decide_validate(engine, black_box(&body), form)))
        });
    }
    let large = std::fs::read(format!("{root}/tests/fixtures/bench/pod-10kb.json")).unwrap();
    for (name, form) in [
        ("pss", ObjectForm::View),
        ("pss-from-tree", ObjectForm::Tree),
    ] {
        group.bench_function(format!("pipeline-10kb/{name}"), |b| {
            b.iter(|| black_box(decide_validate(&pss, black_box(&large), form)))
        });
    }
    let review = parse_review(&body).unwrap();
    let context = EvalContext::new(Endpoint::Validate);
    group.bench_function("evaluate/pss-cel", |b| {
        b.iter(|| {
            black_box(
                pss_cel
                    .evaluate(black_box(&review.request), &context)
                    .unwrap(),
            )
        })
    });
    group.bench_function("parse/whole", |b| {
        b.iter(|| black_box(parse_review(black_box(&body)).unwrap()))
    });
    group.finish();
}

/// Gatekeeper (issue 34): the 10 KB Pod under tests/fixtures/bench/gatekeeper (a
/// ConstraintTemplate whose Rego makes the 10 checks of bench/fixtures/vap, and its constraint)
/// and under that ValidatingAdmissionPolicy, and under the same checks as a CEL template
/// (tests/fixtures/bench/gatekeeper-cel, engine K8sNativeValidation), side by side: `Engine::evaluate` as `serve` calls
/// it (the webhook's review) and as `check` calls it (`gator`'s review, made from the object:
/// what `gator bench` evaluates), and the template as `check` calls it, with the objects given
/// as `data.inventory` (here the Pod alone). Then the template alone on regorus, to split the
/// cost: a clone of the compiled engine and `violation` evaluated on it, with the prototype
/// unprepared (as compiled) and prepared (after one evaluation; src/engine/gatekeeper/rego.rs
/// prepares its prototype when it compiles it), the clone alone, the review turned into
/// regorus's input by way of a JSON review (the request serialized, then regorus's deserializer:
/// two copies of the object, as src/engine/gatekeeper/review.rs built it before it made
/// regorus's value directly), and the compile of the template's one regular expression (what
/// `regex.match` costs per call without regorus's `cache` feature).
fn gatekeeper(c: &mut Criterion) {
    use portcullis::engine::gatekeeper::{EnforcementPoint, Inventory};
    use regorus::Value as RegoValue;

    let root = env!("CARGO_MANIFEST_DIR");
    let template_folder = format!("{root}/tests/fixtures/bench/gatekeeper");
    let rego_engine =
        Engine::load(&[template_folder.clone().into()]).expect("bench ConstraintTemplate");
    let vap_engine =
        Engine::load(&[format!("{root}/bench/fixtures/vap").into()]).expect("bench VAP");
    let cel_engine = Engine::load(&[format!("{root}/tests/fixtures/bench/gatekeeper-cel").into()])
        .expect("bench CEL ConstraintTemplate");
    let body = std::fs::read(format!("{root}/tests/fixtures/bench/pod-10kb.json")).unwrap();
    let review = parse_review(&body).unwrap();
    let webhook = EvalContext::new(Endpoint::Validate);
    let gator = EvalContext::new(Endpoint::Validate)
        .at_enforcement_point(EnforcementPoint::Gator)
        .made_from_object(review.request.object.as_deref());
    let inventory = Inventory::of(review.request.object.as_deref());
    let gator_inventory = gator.with_inventory(Some(&inventory));
    let mut group = c.benchmark_group("gatekeeper");
    for (name, engine, context) in [
        ("rego-template", &rego_engine, &webhook),
        ("vap-10-validations", &vap_engine, &webhook),
        ("cel-template", &cel_engine, &webhook),
        ("rego-template-gator-review", &rego_engine, &gator),
        ("vap-10-validations-gator-review", &vap_engine, &gator),
        ("cel-template-gator-review", &cel_engine, &gator),
        (
            "rego-template-gator-review-inventory",
            &rego_engine,
            &gator_inventory,
        ),
    ] {
        let decision = engine.evaluate(&review.request, context).unwrap();
        assert!(decision.allowed(), "{name}: {:?}", decision.violations);
        assert!(
            decision.warnings.is_empty(),
            "{name}: {:?}",
            decision.warnings
        );
        group.bench_function(format!("validate/{name}/pod-10kb"), |b| {
            b.iter(|| {
                black_box(
                    engine
                        .evaluate(black_box(&review.request), context)
                        .unwrap(),
                )
            })
        });
    }

    // The template's Rego alone, compiled as src/engine/gatekeeper/rego.rs compiles it.
    let template: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(format!("{template_folder}/template.yaml")).unwrap(),
    )
    .unwrap();
    let rego = template["spec"]["targets"][0]["rego"]
        .as_str()
        .expect("the template's rego")
        .to_owned();
    let mut unprepared = regorus::Engine::new();
    unprepared.set_rego_v0(true);
    unprepared.set_strict_builtin_errors(false);
    unprepared.add_policy("rego.rego".into(), rego).unwrap();
    let rule = "data.benchpodchecks.violation".to_owned();
    // The webhook's review as regorus input: the request as JSON, `namespaceObject` null.
    let to_input = |request: &portcullis::admission::AdmissionRequest| {
        let mut review = serde_json::to_value(request).unwrap();
        review["namespaceObject"] = serde_json::Value::Null;
        let mut input = RegoValue::new_object();
        let map = input.as_object_mut().unwrap();
        map.insert(RegoValue::from("review"), RegoValue::from(review));
        map.insert(RegoValue::from("parameters"), RegoValue::new_object());
        input
    };
    let input = to_input(&review.request);
    let mut prepared = unprepared.clone();
    prepared.set_input(input.clone());
    let violations = prepared.eval_rule(rule.clone()).unwrap();
    assert_eq!(violations.as_set().map(|set| set.len()).ok(), Some(0));
    for (name, prototype) in [("unprepared", &unprepared), ("prepared", &prepared)] {
        group.bench_function(format!("regorus/clone+eval/{name}/pod-10kb"), |b| {
            b.iter(|| {
                let mut engine = black_box(prototype).clone();
                engine.set_input(input.clone());
                black_box(engine.eval_rule(rule.clone()).unwrap())
            })
        });
        group.bench_function(format!("regorus/clone/{name}"), |b| {
            b.iter(|| black_box(black_box(prototype).clone()))
        });
    }
    group.bench_function("regorus/review-to-input/pod-10kb", |b| {
        b.iter(|| black_box(to_input(black_box(&review.request))))
    });
    // What regorus's `regex.match` does per call without its `cache` feature: compile the
    // pattern (src/builtins/regex.rs, a 100 KiB size limit), here with Portcullis's features of
    // the regex crates.
    group.bench_function("regorus/regex-compile", |b| {
        b.iter(|| {
            black_box(
                regex::RegexBuilder::new(black_box(":[^/]+$"))
                    .size_limit(100 * 1024)
                    .build()
                    .unwrap(),
            )
        })
    });
    group.finish();
}

/// What one more trivial validation costs: the same VAP with 1 and with 21 validations like
/// issue 36's trivial one, on the small Pod; (21's time - 1's) / 20 is one validation's cost.
fn validation_cost(c: &mut Criterion) {
    let root = env!("CARGO_MANIFEST_DIR");
    let body = std::fs::read(format!("{root}/bench/fixtures/pod-small-review.json")).unwrap();
    let review = parse_review(&body).unwrap();
    let context = EvalContext::new(Endpoint::Validate);
    let mut group = c.benchmark_group("validation-cost");
    for count in [1, 21] {
        let engine = Engine::load(&[format!("{root}/bench/fixtures/vap-trivial-{count}").into()])
            .expect("the trivial-validations VAP");
        let decision = engine.evaluate(&review.request, &context).unwrap();
        assert!(decision.allowed(), "{:?}", decision.violations);
        group.bench_function(format!("validate/vap-trivial-{count}/pod-small"), |b| {
            b.iter(|| {
                black_box(
                    engine
                        .evaluate(black_box(&review.request), &context)
                        .unwrap(),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    pipeline,
    validation_cost,
    router,
    standard_set,
    defaulting,
    small_pod,
    gatekeeper
);
criterion_main!(benches);
