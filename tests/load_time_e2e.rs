//! Differential test of load-time checking: what kube-apiserver refuses when a
//! ValidatingAdmissionPolicy or MutatingAdmissionPolicy is created (expressions that do not
//! parse or type-check, or do not evaluate to what their field needs) against what
//! `portcullis check --policies` refuses when it loads the same policy, with the same field path
//! and message.
//!
//! The fixtures are `tests/fixtures/load-time/*.yaml`: small policies, several per file, each
//! probing one thing (a YAML comment above each says what). `observed.json` beside them is the
//! apiserver's answer to creating each policy alone: `"created"`, or the errors it lists, each
//! `field: message` as kubectl prints it after `is invalid: ` (one per `* ` item when there are
//! several). It is recorded by the live test with `PORTCULLIS_E2E_WRITE_OBSERVED=1`:
//!
//! - `recorded_answers_are_the_apiservers` (live; needs `PORTCULLIS_E2E_BIN`): starts etcd and
//!   kube-apiserver, creates every policy with `kubectl create --dry-run=server` and checks that
//!   `observed.json` is still what the apiserver answers (or writes it).
//! - `portcullis_refuses_what_the_apiserver_refuses` (offline, always runs): runs `portcullis
//!   check --policies FILE /dev/null` on each policy alone and compares its answer with the
//!   recorded one: exit 0 for a created policy (warnings on stderr are not refusals); for a
//!   refused one, exit 2 and the text after `(document N): ` equal to the apiserver's error, or
//!   to all of its errors in its order, listed as kubectl lists them (`\n* field: message`
//!   each), when it lists several.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::control_plane::{ControlPlane, PORTCULLIS, e2e_bin, stderr};
use common::fixture;
use serde_json::{Value, json};

const FIXTURES: &str = "load-time";
const OBSERVED: &str = "load-time/observed.json";
/// kubectl or portcullis processes running at once.
const WORKERS: usize = 8;
const MAP_KIND: &str = "MutatingAdmissionPolicy";

/// One policy document of the fixtures.
struct Policy {
    file: String,
    kind: String,
    name: String,
    /// The document as written, its comment included.
    text: String,
}

/// What creating (or loading) one policy gives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Created,
    /// Each error as `field: message`, in the order given.
    Refused(Vec<String>),
    /// Anything else (Portcullis only): exit status and stderr.
    Failed(String),
}

#[test]
fn recorded_answers_are_the_apiservers() {
    let Some(bin) = e2e_bin() else { return };
    let policies = fixture_policies();
    let cluster = ControlPlane::start(&bin);
    let version = cluster.git_version();
    let map_served = mutating_admission_policy_served(&cluster);
    let (asked, skipped): (Vec<&Policy>, Vec<&Policy>) = policies
        .iter()
        .partition(|policy| map_served || policy.kind != MAP_KIND);
    if !skipped.is_empty() {
        eprintln!(
            "SKIPPED {} MutatingAdmissionPolicies: admissionregistration.k8s.io/v1 \
             mutatingadmissionpolicies is not served by kube-apiserver {version}",
            skipped.len()
        );
    }
    let answers: BTreeMap<String, Answer> = asked
        .iter()
        .zip(in_parallel(&asked, |policy| {
            apiserver_answer(&cluster, policy)
        }))
        .map(|(policy, answer)| (policy.name.clone(), answer))
        .collect();
    let refused = answers.values().filter(|a| **a != Answer::Created).count();
    eprintln!(
        "e2e: kube-apiserver {version} refused {refused} of {} policies",
        answers.len()
    );

    let observed_path = fixture(OBSERVED);
    if std::env::var_os("PORTCULLIS_E2E_WRITE_OBSERVED").is_some_and(|v| !v.is_empty()) {
        assert!(
            skipped.is_empty(),
            "not recording {}: some policies were not asked",
            observed_path.display()
        );
        std::fs::write(&observed_path, recorded_file(&version, &answers)).unwrap();
        eprintln!("e2e: wrote {}", observed_path.display());
        return;
    }
    let (recorded_version, recorded) = recorded_answers();
    assert_eq!(
        recorded_version, version,
        "{OBSERVED} records kube-apiserver {recorded_version}, PORTCULLIS_E2E_BIN runs {version}"
    );
    let mut report = String::new();
    for (name, answer) in &answers {
        match recorded.get(name) {
            Some(recorded) if recorded == answer => {}
            Some(recorded) => {
                report += &format!(
                    "policy {name}:\n  recorded: {}\n  apiserver now: {}\n",
                    describe(recorded),
                    describe(answer)
                );
            }
            None => {
                report += &format!(
                    "policy {name}: not recorded; apiserver now: {}\n",
                    describe(answer)
                );
            }
        }
    }
    if skipped.is_empty() {
        for name in recorded.keys().filter(|name| !answers.contains_key(*name)) {
            report += &format!("policy {name}: recorded but no longer in the fixtures\n");
        }
        let text = std::fs::read_to_string(&observed_path).unwrap_or_default();
        if report.is_empty() && text != recorded_file(&version, &answers) {
            report += "the answers agree but the file is not as the test writes it\n";
        }
    }
    assert!(
        report.is_empty(),
        "{} is not what the apiserver says now: rerun this test with \
         PORTCULLIS_E2E_WRITE_OBSERVED=1 and review the diff:\n{report}",
        observed_path.display()
    );
}

/// Policies on which Portcullis and the apiserver are known to differ, with the cause
/// (docs/conformance.md). Every one is refused by the apiserver; Portcullis loads it or words
/// the refusal differently.
const KNOWN: &[(&str, &str)] = &[];

#[test]
fn portcullis_refuses_what_the_apiserver_refuses() {
    // Known divergences are listed in KNOWN with their cause; each is still a refusal by the
    // apiserver (never a policy Portcullis refuses and the apiserver creates).
    let policies = fixture_policies();
    let (version, recorded) = recorded_answers();
    let work = tempfile::tempdir().unwrap();
    let answers = in_parallel(&policies, |policy| portcullis_answer(work.path(), policy));

    let mut report = String::new();
    let mut mismatches = 0;
    let mut known_divergences = 0;
    for (policy, portcullis) in policies.iter().zip(&answers) {
        let Some(apiserver) = recorded.get(&policy.name) else {
            mismatches += 1;
            report += &format!(
                "policy {} ({}): not in {OBSERVED}: record it (see tests/load_time_e2e.rs)\n",
                policy.name, policy.file
            );
            continue;
        };
        let known = KNOWN.iter().find(|(name, _)| *name == policy.name);
        if let Some((name, _)) = known
            && agree(apiserver, portcullis)
        {
            mismatches += 1;
            report += &format!("policy {name}: agrees now; remove it from KNOWN\n");
            continue;
        }
        if let Some((_, reason)) = known {
            if *apiserver == Answer::Created {
                mismatches += 1;
                report += &format!(
                    "policy {}: the apiserver creates it: a known divergence may never be a \
                     refusal by Portcullis\n",
                    policy.name
                );
            }
            known_divergences += 1;
            eprintln!(
                "known divergence {} ({}): {reason}",
                policy.name, policy.file
            );
            continue;
        }
        if !agree(apiserver, portcullis) {
            mismatches += 1;
            report += &format!(
                "policy {} ({}):\n  kube-apiserver: {}\n  portcullis:     {}\n",
                policy.name,
                policy.file,
                describe(apiserver),
                describe(portcullis)
            );
        }
    }
    let names: BTreeSet<&str> = policies.iter().map(|p| p.name.as_str()).collect();
    for name in recorded.keys().filter(|n| !names.contains(n.as_str())) {
        mismatches += 1;
        report += &format!("policy {name}: in {OBSERVED} but not in the fixtures\n");
    }
    let refused = recorded.values().filter(|a| **a != Answer::Created).count();
    eprintln!(
        "load time: {} policies, kube-apiserver {version} refuses {refused}; Portcullis agrees \
         on {}, {known_divergences} known divergences (KNOWN)",
        policies.len(),
        policies
            .len()
            .saturating_sub(mismatches)
            .saturating_sub(known_divergences)
    );
    assert!(
        mismatches == 0,
        "Portcullis and kube-apiserver {version} ({OBSERVED}) differ on {mismatches} of {} \
         policies:\n{report}",
        policies.len()
    );
}

/// Every policy document of `tests/fixtures/load-time/*.yaml`, file by file in name order;
/// checks that names are unique and that each document has its comment.
fn fixture_policies() -> Vec<Policy> {
    let mut files: Vec<_> = std::fs::read_dir(fixture(FIXTURES))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut policies = Vec::new();
    let mut names = BTreeSet::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (index, document) in documents(&text).into_iter().enumerate() {
            let value: Value = serde_norway::from_str(&document)
                .unwrap_or_else(|e| panic!("{file}, document {index}: {e}"));
            let kind = value["kind"].as_str().unwrap_or_default().to_owned();
            let name = value["metadata"]["name"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}, document {index}: no metadata.name"))
                .to_owned();
            assert!(
                ["ValidatingAdmissionPolicy", MAP_KIND].contains(&kind.as_str()),
                "{file}: {name} is a {kind:?}"
            );
            assert!(
                document.trim_start().starts_with("# "),
                "{file}: {name} has no comment saying what it probes"
            );
            assert!(names.insert(name.clone()), "{file}: {name} is not unique");
            policies.push(Policy {
                file: file.clone(),
                kind,
                name,
                text: document,
            });
        }
    }
    assert!(policies.len() > 100, "too few policies: {}", policies.len());
    policies
}

/// The documents of a multi-document YAML file (split at `---` lines), without those that hold
/// only comments (the file's header).
fn documents(text: &str) -> Vec<String> {
    let mut documents = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            documents.push(String::new());
        } else {
            let current = documents.last_mut().unwrap();
            current.push_str(line);
            current.push('\n');
        }
    }
    documents.retain(|document| {
        document
            .lines()
            .any(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
    });
    documents
}

/// `f` of each item, on [`WORKERS`] threads, in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(index) else { break };
                    let result = f(item);
                    results.lock().unwrap()[index] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect()
}

/// `kubectl create --dry-run=server` of the policy alone.
fn apiserver_answer(cluster: &ControlPlane, policy: &Policy) -> Answer {
    let output = cluster.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &policy.text);
    if output.status.success() {
        return Answer::Created;
    }
    let text = stderr(&output);
    let Some((_, errors)) = text.split_once(" is invalid: ") else {
        panic!(
            "kubectl create {} ({}): not an Invalid answer: {text}",
            policy.name, policy.file
        );
    };
    Answer::Refused(kubectl_errors(errors.trim_end_matches('\n')))
}

/// The errors of kubectl's `is invalid: ` text: one, or a `* ` item each when there are several.
fn kubectl_errors(text: &str) -> Vec<String> {
    match text.strip_prefix("\n* ") {
        Some(items) => items.split("\n* ").map(str::to_owned).collect(),
        None => vec![text.to_owned()],
    }
}

/// `portcullis check --policies FILE /dev/null`, FILE holding the policy alone.
fn portcullis_answer(work: &Path, policy: &Policy) -> Answer {
    let file = work.join(format!("{}.yaml", policy.name));
    std::fs::write(&file, &policy.text).unwrap();
    let output = Command::new(PORTCULLIS)
        .arg("check")
        .arg("--policies")
        .arg(&file)
        .arg("/dev/null")
        .output()
        .expect("run portcullis check");
    let text = stderr(&output);
    const REFUSAL: &str = "error: cannot load the policies: ";
    match (output.status.code(), text.split_once(REFUSAL)) {
        (Some(0), _) => Answer::Created,
        (Some(2), Some((_, refusal))) => {
            let refusal = refusal.trim_end_matches('\n');
            let error = document_error(refusal).unwrap_or(refusal);
            Answer::Refused(vec![error.to_owned()])
        }
        (code, _) => Answer::Failed(format!("exit {code:?}: {text}")),
    }
}

/// The text after the first `(document N): ` of a refusal.
fn document_error(refusal: &str) -> Option<&str> {
    static DOCUMENT: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\(document [0-9]+\): ").unwrap());
    DOCUMENT.find(refusal).map(|m| &refusal[m.end()..])
}

/// Whether Portcullis's answer is the apiserver's: both created, or Portcullis's error is the
/// apiserver's only one, or all of them in its order, listed as kubectl lists them.
fn agree(apiserver: &Answer, portcullis: &Answer) -> bool {
    match (apiserver, portcullis) {
        (Answer::Created, Answer::Created) => true,
        (Answer::Refused(expected), Answer::Refused(got)) => {
            match (expected.as_slice(), got.as_slice()) {
                ([only], [one]) => only == one,
                (several, [one]) => *one == format!("\n* {}", several.join("\n* ")),
                _ => expected == got,
            }
        }
        _ => false,
    }
}

/// An answer for a report: `created`, or each error as a Rust string literal (exact text).
fn describe(answer: &Answer) -> String {
    match answer {
        Answer::Created => "created".to_owned(),
        Answer::Refused(errors) if errors.len() == 1 => format!("{:?}", errors[0]),
        Answer::Refused(errors) => errors
            .iter()
            .enumerate()
            .map(|(i, e)| format!("\n    [{i}] {e:?}"))
            .collect(),
        Answer::Failed(text) => format!("(not a load error) {text:?}"),
    }
}

/// Whether the apiserver serves `admissionregistration.k8s.io/v1` MutatingAdmissionPolicies
/// (the version the fixtures are written in).
fn mutating_admission_policy_served(cluster: &ControlPlane) -> bool {
    let output = cluster.kubectl(&["get", "--raw", "/apis/admissionregistration.k8s.io/v1"]);
    let list: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|resource| resource["name"] == "mutatingadmissionpolicies")
}

/// `observed.json`: each policy's answer, `"created"` or the list of its errors.
fn recorded_file(version: &str, answers: &BTreeMap<String, Answer>) -> String {
    let policies: serde_json::Map<String, Value> = answers
        .iter()
        .map(|(name, answer)| {
            let value = match answer {
                Answer::Created => json!("created"),
                Answer::Refused(errors) => json!(errors),
                Answer::Failed(text) => panic!("{name}: {text}"),
            };
            (name.clone(), value)
        })
        .collect();
    let document = json!({
        "comment": "kube-apiserver's answer to `kubectl create --dry-run=server` of each policy of \
                    load-time/*.yaml alone: \"created\", or the errors after `is invalid: ` (one \
                    per `* ` item when kubectl lists several); written by \
                    PORTCULLIS_E2E_WRITE_OBSERVED=1 cargo test --test load_time_e2e \
                    (tests/load_time_e2e.rs), not by hand",
        "kubernetes": version,
        "policies": policies,
    });
    serde_json::to_string_pretty(&document).unwrap() + "\n"
}

/// The recorded kube-apiserver version and answers.
fn recorded_answers() -> (String, BTreeMap<String, Answer>) {
    let text = String::from_utf8(common::read_fixture(OBSERVED)).unwrap();
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let answers = recorded["policies"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| {
            let answer = match value {
                Value::String(s) if s == "created" => Answer::Created,
                Value::Array(errors) => Answer::Refused(
                    errors
                        .iter()
                        .map(|e| e.as_str().unwrap().to_owned())
                        .collect(),
                ),
                other => panic!("{OBSERVED}: {name}: not an answer: {other}"),
            };
            (name.clone(), answer)
        })
        .collect();
    let version = recorded["kubernetes"].as_str().unwrap_or("?").to_owned();
    (version, answers)
}

#[test]
fn kubectl_errors_are_split_at_items() {
    assert_eq!(
        kubectl_errors("spec.a: Invalid value: \"x\": bad\n | x\n | ^"),
        ["spec.a: Invalid value: \"x\": bad\n | x\n | ^"]
    );
    assert_eq!(
        kubectl_errors("\n* spec.a: one\n | a\n | ^\n* spec.b: two"),
        ["spec.a: one\n | a\n | ^", "spec.b: two"]
    );
}
