//! Minimised divergences (`tests/fixtures/conformance/*.yaml`): policies, one object, the
//! apiserver's exact answer and, for a known divergence, Portcullis's. Checked against
//! `portcullis check` without the apiserver, and replayed against the apiserver by the
//! generated test, so the recorded answers stay the apiserver's.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::control_plane::PORTCULLIS;
use crate::compare::{self, Answer};

/// One minimised case.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// The known cause (a class of `compare::KNOWN`), or `agrees` for a fixed divergence kept
    /// as a regression test against the apiserver.
    pub class: String,
    /// Where the cause is tracked.
    pub issue: String,
    /// Policies, bindings and parameter objects.
    pub policies: Vec<Value>,
    /// The object both sides judge (as the apiserver defaults it).
    #[serde(default)]
    pub object: Value,
    /// The apiserver's answer.
    #[serde(default)]
    pub apiserver: Option<Answer>,
    /// Portcullis's answer, when it differs from the apiserver's.
    #[serde(default)]
    pub portcullis: Option<Answer>,
    /// For a policy the apiserver refuses at create: a part of its message.
    #[serde(default)]
    pub refused: Option<String>,
}

impl Fixture {
    /// Whether a MutatingAdmissionPolicy is among the policies (the object is compared).
    pub fn mutating(&self) -> bool {
        self.policies
            .iter()
            .any(|d| d["kind"] == "MutatingAdmissionPolicy")
    }
}

pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance")
}

/// Every fixture, by file name, sorted.
pub fn all() -> Vec<(String, Fixture)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let fixture: Fixture =
                serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, fixture)
        })
        .collect()
}

/// `portcullis check --output json` of the fixture: exit code and (exit 0 or 1) its answer.
pub fn check(work: &Path, name: &str, fixture: &Fixture) -> (i32, Option<Answer>) {
    let policies = work.join(format!("{name}-policies.yaml"));
    let stream: String = fixture
        .policies
        .iter()
        .map(|d| format!("---\n{d}\n"))
        .collect();
    std::fs::write(&policies, stream).unwrap();
    let object = work.join(format!("{name}-object.json"));
    let input = if fixture.object.is_null() {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "unused", "namespace": "conformance"}})
    } else {
        fixture.object.clone()
    };
    std::fs::write(&object, input.to_string()).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(&policies)
        .arg(&object)
        .output()
        .unwrap();
    let code = output.status.code().unwrap_or(-1);
    if !matches!(code, 0 | 1) {
        return (code, None);
    }
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let answer = compare::portcullis_answer(&results[0], &input, fixture.mutating());
    (code, Some(answer))
}
