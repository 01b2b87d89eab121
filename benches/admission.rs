//! parse → decide → respond, for the built-in rules: the pure pipeline and the whole router
//! in-process (no socket). No timing assertions: read the reports.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::admission::{encode_review, parse_review};
use portcullis::engine::{Endpoint, Engine, EvalContext};
use portcullis::server::{AppState, RequestSettings, webhook_router};
use tower::ServiceExt;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/reviews/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pipeline(c: &mut Criterion) {
    let engine = Engine::builtin();
    let mut group = c.benchmark_group("pipeline");
    for (name, endpoint) in [
        ("pod-create-compliant.json", Endpoint::Validate),
        ("pod-create-compliant.json", Endpoint::Mutate),
        ("pod-create-privileged.json", Endpoint::Validate),
        ("deployment-update.json", Endpoint::Validate),
    ] {
        let body = fixture(name);
        group.throughput(criterion::Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("{}/{}", endpoint.name(), name), |b| {
            b.iter(|| {
                let review = parse_review(black_box(&body)).unwrap();
                let context = EvalContext::new(endpoint);
                let decision = engine.evaluate(&review.request, &context).unwrap();
                let response = decision.to_response(&review.request.uid);
                black_box(encode_review(review.version, &response))
            })
        });
    }
    group.finish();
}

fn router(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = webhook_router(AppState::new(Engine::builtin(), RequestSettings::default()));
    let body = fixture("pod-create-compliant.json");
    c.bench_function("router/validate/pod-create-compliant.json", |b| {
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

criterion_group!(benches, pipeline, router);
criterion_main!(benches);
