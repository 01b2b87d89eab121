//! The Kubernetes CEL libraries, data-driven: every `tests/fixtures/cel/*.yaml` holds cases
//! modelled on the apiserver's `staging/src/k8s.io/apiserver/pkg/cel/library/*_test.go`
//! tables. A case gives an expression and either the expected `value` (compared as JSON) or
//! an `error` substring (of the compile error or of the evaluation error). Optional `object`
//! binds `object`.

use std::path::Path;

use portcullis::expressions::{Activation, CelEnvironment, cel_to_json};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    expr: String,
    #[serde(default)]
    value: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    object: Option<serde_json::Value>,
}

fn run(env: &CelEnvironment, case: &Case) -> Result<(), String> {
    let outcome = env
        .compile(&case.expr)
        .map_err(|e| e.message)
        .and_then(|program| {
            let object = case.object.clone().unwrap_or(serde_json::Value::Null);
            let activation = Activation::new().object(&object);
            program
                .evaluate(&activation)
                .and_then(|v| cel_to_json(&v))
                .map_err(|e| e.to_string())
        });
    match (&case.value, &case.error, outcome) {
        (Some(want), None, Ok(got)) if *want == got => Ok(()),
        (None, Some(want), Err(got)) if got.contains(want.as_str()) => Ok(()),
        (Some(_), Some(_), _) | (None, None, _) => Err("give one of value or error".to_owned()),
        (Some(want), None, got) => Err(format!("want {want}, got {got:?}")),
        (None, Some(want), got) => Err(format!("want error containing {want:?}, got {got:?}")),
    }
}

#[test]
fn kubernetes_cel_libraries() {
    let env = CelEnvironment::kubernetes();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cel");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    let mut failures = Vec::new();
    let mut total = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("fixture readable");
        let fixture: Fixture =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file.file_stem().unwrap_or_default().to_string_lossy();
        let mut passed = 0;
        for case in &fixture.cases {
            match run(&env, case) {
                Ok(()) => passed += 1,
                Err(why) => failures.push(format!("{name}: {}: {why}", case.expr)),
            }
        }
        total += fixture.cases.len();
        println!("{name}: {passed}/{} passed", fixture.cases.len());
    }
    println!("all: {}/{total} passed", total - failures.len());
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
}
