//! The object model's cost per request: the typed decode check and the typed round-trip of the
//! 10 KB Pod of `tests/fixtures/bench/pod-10kb.json`, a schema lookup, and a request's object
//! read into a `serde_json::Value` and into an `ObjectView`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::admission::GroupVersionKind;
use portcullis::admission::object_view::ObjectView;

#[path = "../src/allocator.rs"]
mod allocator;

/// The binary's allocator (src/main.rs), so the figures are the server's.
#[global_allocator]
static ALLOCATOR: allocator::MiMalloc = allocator::MiMalloc;

/// The `request.object` of a review fixture, as compact JSON (as the apiserver writes it).
fn object_text(path: &str) -> String {
    let body = std::fs::read(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).expect(path);
    let review: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    serde_json::to_string(&review["request"]["object"]).expect("JSON")
}
use portcullis::kubernetes::schema::{
    builtin,
    decode::{check_decode, check_decode_json},
    round_trip::round_trip,
};

fn object_model(c: &mut Criterion) {
    let body = std::fs::read(format!(
        "{}/tests/fixtures/bench/pod-10kb.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the 10 KB Pod review");
    let review: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let pod = review["request"]["object"].clone();
    assert!(pod.is_object(), "the review carries a Pod");
    let gvk = GroupVersionKind {
        group: String::new(),
        version: "v1".to_owned(),
        kind: "Pod".to_owned(),
    };
    let schema = builtin(&gvk).expect("Pod is built in");
    check_decode(&schema, &pod).expect("the bench Pod decodes");

    let mut group = c.benchmark_group("object-model");
    group.bench_function("lookup/Pod", |b| {
        b.iter(|| black_box(builtin(black_box(&gvk))))
    });
    group.bench_function("decode-check/pod-10kb", |b| {
        b.iter(|| black_box(check_decode(&schema, black_box(&pod))))
    });
    let pod_view = ObjectView::parse(&pod.to_string()).expect("JSON");
    group.bench_function("decode-check/view/pod-10kb", |b| {
        b.iter(|| {
            black_box(check_decode_json(
                &schema,
                black_box(pod_view.root()).into(),
            ))
        })
    });
    group.bench_function("round-trip/pod-10kb", |b| {
        b.iter(|| black_box(round_trip(&schema, black_box(&pod))))
    });
    for (name, path) in [
        ("pod-10kb", "tests/fixtures/bench/pod-10kb.json"),
        ("pod-small", "bench/fixtures/pod-small-review.json"),
    ] {
        let text = object_text(path);
        group.bench_function(format!("read+drop/ignored/{name}"), |b| {
            b.iter(|| {
                black_box(serde_json::from_str::<serde::de::IgnoredAny>(black_box(
                    &text,
                )))
            })
        });
        group.bench_function(format!("read+drop/value/{name}"), |b| {
            b.iter(|| black_box(serde_json::from_str::<serde_json::Value>(black_box(&text))))
        });
        group.bench_function(format!("read+drop/view/{name}"), |b| {
            b.iter(|| black_box(ObjectView::parse(black_box(&text))))
        });
    }
    group.finish();
}

criterion_group!(benches, object_model);
criterion_main!(benches);
