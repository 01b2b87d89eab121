//! The CEL `authorizer` offline: `portcullis check --authorizer allow|deny|FILE` and
//! `portcullis test` with answers stated by a PolicyTest (suite or case) or by the flag, run as
//! processes on the fixtures in `tests/fixtures/authorizer`.

use std::process::{Command, Output};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const POLICY: &str = "tests/fixtures/authorizer/policy.yaml";
const DENIAL: &str = "setting replicas needs update on deployments";

fn portcullis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .current_dir(ROOT)
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_AUTHORIZER")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `check --output json` of the fixtures `files` with `authorizer` flags: exit code, and each
/// document's name with its violation messages.
fn check(authorizer: &[&str], files: &[&str]) -> (i32, Vec<(String, Vec<String>)>) {
    let mut args = vec!["check", "--output", "json", "--policies", POLICY];
    args.extend(authorizer);
    let paths: Vec<String> = files
        .iter()
        .map(|f| format!("tests/fixtures/authorizer/{f}"))
        .collect();
    args.extend(paths.iter().map(String::as_str));
    let output = portcullis(&args);
    let results: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}; stderr: {}", text(&output.stderr)));
    let decided = results
        .iter()
        .map(|result| {
            let messages = result["violations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["message"].as_str().unwrap().to_owned())
                .collect();
            (result["name"].as_str().unwrap().to_owned(), messages)
        })
        .collect();
    (output.status.code().unwrap(), decided)
}

fn messages<'a>(decided: &'a [(String, Vec<String>)], name: &str) -> &'a [String] {
    &decided.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn without_answers_an_authorizer_check_fails_its_expression() {
    let (code, decided) = check(&[], &["configmaps.yaml"]);
    assert_eq!(code, 1);
    // Both ask (`errored()` is checked whatever the data), both fail under failurePolicy Fail.
    for name in ["plain", "scaled"] {
        let failed = messages(&decided, name);
        assert!(!failed.is_empty());
        assert!(
            failed.iter().all(|m| m.contains("resulted in error")
                && m.contains("no authorizer is configured")
                && m.contains("--authorizer")),
            "{failed:#?}"
        );
    }
}

#[test]
fn allow_and_deny_answer_every_question() {
    let (code, decided) = check(&["--authorizer", "allow"], &["configmaps.yaml"]);
    assert_eq!(code, 0, "{decided:#?}");
    let (code, decided) = check(&["--authorizer", "deny"], &["configmaps.yaml"]);
    assert_eq!(code, 1);
    assert!(messages(&decided, "plain").is_empty());
    let scaled = messages(&decided, "scaled");
    assert_eq!(scaled.len(), 1, "{scaled:#?}");
    assert!(scaled[0].ends_with(DENIAL), "{scaled:#?}");
}

#[test]
fn a_table_answers_by_user_and_attributes() {
    let (code, decided) = check(
        &["--authorizer", "tests/fixtures/authorizer/answers.yaml"],
        &["review-alice.json", "review-bob.json"],
    );
    assert_eq!(code, 1);
    assert!(messages(&decided, "by-alice").is_empty(), "{decided:#?}");
    let bob = messages(&decided, "by-bob");
    assert_eq!(bob.len(), 1, "{bob:#?}");
    assert!(bob[0].ends_with(DENIAL));
}

#[test]
fn an_error_answer_is_errored_in_the_expression() {
    let work = tempfile::tempdir().unwrap();
    let review = std::fs::read_to_string(format!(
        "{ROOT}/tests/fixtures/authorizer/review-alice.json"
    ))
    .unwrap()
    .replace("team-a", "team-b");
    let path = work.path().join("team-b.json");
    std::fs::write(&path, review).unwrap();
    let output = portcullis(&[
        "check",
        "--output",
        "json",
        "--policies",
        POLICY,
        "--authorizer",
        "tests/fixtures/authorizer/answers.yaml",
        path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let violations: Vec<&str> = results[0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["message"].as_str().unwrap())
        .collect();
    assert_eq!(violations.len(), 2, "{violations:#?}");
    assert!(violations.iter().any(|m| m.ends_with(DENIAL)));
    assert!(
        violations
            .iter()
            .any(|m| m.ends_with("the authorizer could not decide"))
    );
}

#[test]
fn a_bad_answers_file_is_an_error() {
    for (flag, expected) in [
        (
            "tests/fixtures/authorizer/broken-answers.yaml",
            "rules[0].verbs: unknown field `verbs`",
        ),
        (
            "tests/fixtures/authorizer/none.yaml",
            "cannot read authorizer answers",
        ),
    ] {
        let output = portcullis(&[
            "check",
            "--policies",
            POLICY,
            "--authorizer",
            flag,
            "tests/fixtures/authorizer/configmaps.yaml",
        ]);
        assert_eq!(output.status.code(), Some(2), "{flag}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains("--authorizer") && stderr.contains(expected),
            "{stderr}"
        );
    }
}

#[test]
fn suites_state_answers_for_themselves_and_for_a_case() {
    let output = portcullis(&["test", "tests/fixtures/authorizer/suite.yaml"]);
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}");
    assert!(table.contains("6 passed, 0 failed, 0 errors"), "{table}");
}

#[test]
fn the_flag_answers_for_suites_that_state_none() {
    let suite = "tests/fixtures/authorizer/suite-without-answers.yaml";
    let output = portcullis(&["test", suite]);
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{table}");
    assert!(table.contains("no authorizer is configured"), "{table}");
    let output = portcullis(&["test", "--authorizer", "allow", suite]);
    let table = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}");
    // The suite's own answers win over the flag's.
    let output = portcullis(&[
        "test",
        "--authorizer",
        "deny",
        "tests/fixtures/authorizer/suite.yaml",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
}

#[test]
fn a_message_expression_may_not_name_the_authorizer() {
    let output = portcullis(&[
        "check",
        "--authorizer",
        "allow",
        "--policies",
        "tests/fixtures/authorizer/message-expression.yaml",
        "tests/fixtures/authorizer/configmaps.yaml",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("spec.validations[0].messageExpression")
            && stderr.contains("undeclared reference to 'authorizer'"),
        "{stderr}"
    );
}

/// As in the apiserver (tests/authorizer_e2e.rs compares the text): auditAnnotations are
/// evaluated without `authorizer`, and the error denies under failurePolicy Fail.
#[test]
fn an_audit_annotation_has_no_authorizer() {
    let output = portcullis(&[
        "check",
        "--output",
        "json",
        "--authorizer",
        "allow",
        "--policies",
        "tests/fixtures/e2e/authorizer/audit-policy.yaml",
        "--policies",
        "tests/fixtures/e2e/authorizer/audit-portcullis-binding.yaml",
        "tests/fixtures/e2e/authorizer/rbac.yaml",
        "tests/fixtures/authorizer/audit-configmap.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let configmap = results.iter().find(|r| r["kind"] == "ConfigMap").unwrap();
    let message = configmap["violations"][0]["message"].as_str().unwrap();
    assert!(
        message.ends_with("resulted in error: no such attribute(s): authorizer"),
        "{message}"
    );
}

#[test]
fn a_check_costs_what_it_costs_in_the_apiserver() {
    let output = portcullis(&[
        "check",
        "--output",
        "json",
        "--authorizer",
        "allow",
        "--policies",
        "tests/fixtures/authorizer/three-checks.yaml",
        "tests/fixtures/authorizer/configmaps.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let messages: Vec<&str> = results[0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert!(
        messages[0].contains("authorizer.path('/c')")
            && messages[0].ends_with("operation cancelled: actual cost limit exceeded"),
        "{messages:#?}"
    );
}
