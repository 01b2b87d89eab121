//! `portcullis test` on gator `Suite` files (`test.gatekeeper.sh/v1alpha1`), as `gator verify`
//! (Gatekeeper v3.23.1) runs them.
//!
//! Without gator:
//! - `every_gatekeeper_scenario_suite_passes`: the suites of `tests/fixtures/gatekeeper/`
//!   (written to pass `gator verify`) pass, one row per case (and per `invalid` test).
//! - `gator_semantics_suite_passes`, `failing_assertions_are_reported`,
//!   `cases_that_cannot_run_are_errors`: the suites of `tests/fixtures/gator-suites/`.
//!
//! With gator (`PORTCULLIS_GATOR`; skipped with a message without it, except under `CI=true`,
//! where it fails):
//! - `gator_verify_agrees_case_by_case`: every case of every suite above passes, fails or is
//!   skipped in both (an `ERROR` of Portcullis is a failure of gator's).
//! - `gator_verify_reports_the_same_violations`: every case of the scenarios, with its
//!   assertions replaced by `violations: 0`, so that both print every violation's message:
//!   the messages are the same, in the same order.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::gator;
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PORTCULLIS: &str = env!("CARGO_BIN_EXE_portcullis");

/// The scenario folders of `tests/fixtures/gatekeeper/` that hold a `suite.yaml`, sorted.
fn scenarios() -> Vec<PathBuf> {
    let root = Path::new(ROOT).join("tests/fixtures/gatekeeper");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("suite.yaml").is_file())
        .collect();
    found.sort();
    assert!(found.len() >= 10, "scenarios under {}", root.display());
    found
}

/// Relative to the crate, where both commands run.
fn gator_suites() -> PathBuf {
    PathBuf::from("tests/fixtures/gator-suites")
}

/// One row of the result table.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    case: String,
    result: String,
    reason: String,
}

/// `portcullis test PATH`: exit code, the rows, the whole output.
fn portcullis_test(path: &Path) -> (i32, Vec<Row>, String) {
    let output = Command::new(PORTCULLIS)
        .arg("test")
        .arg(path)
        .current_dir(ROOT)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let mut lines = stdout.lines();
    let header = lines.next().unwrap_or_else(|| panic!("no table:\n{all}"));
    let column = |name: &str| {
        header
            .find(name)
            .unwrap_or_else(|| panic!("no {name} column:\n{all}"))
    };
    let (case, result, reason) = (column("CASE"), column("RESULT"), column("REASON"));
    let rows = lines
        .filter_map(|line| {
            // Rows only: not the summary, nor the continuation of a reason that spans lines.
            let status = line.get(result..)?.split_whitespace().next()?;
            ["PASS", "FAIL", "ERROR", "SKIP"]
                .contains(&status)
                .then(|| Row {
                    case: line[case..result].trim().to_owned(),
                    result: status.to_owned(),
                    reason: line.get(reason..).unwrap_or_default().to_owned(),
                })
        })
        .collect();
    (output.status.code().expect("exited by a signal"), rows, all)
}

fn row<'r>(rows: &'r [Row], case: &str, all: &str) -> &'r Row {
    rows.iter()
        .find(|row| row.case == case)
        .unwrap_or_else(|| panic!("no row {case:?} in\n{all}"))
}

fn suite_value(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows a suite must give: `test/case` for each case, the test's name for a test with
/// `invalid: true`.
fn expected_rows(suite: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for test in suite["tests"].as_array().unwrap() {
        let test_name = test["name"].as_str().unwrap();
        if test["invalid"] == Value::Bool(true) {
            names.push(test_name.to_owned());
        }
        for case in test["cases"].as_array().into_iter().flatten() {
            names.push(format!("{test_name}/{}", case["name"].as_str().unwrap()));
        }
    }
    names
}

#[test]
fn every_gatekeeper_scenario_suite_passes() {
    let mut report = String::new();
    let mut total = 0;
    for scenario in scenarios() {
        let suite = scenario.join("suite.yaml");
        let (code, rows, all) = portcullis_test(&suite);
        let names: Vec<String> = rows.iter().map(|r| r.case.clone()).collect();
        let expected = expected_rows(&suite_value(&suite));
        total += expected.len();
        if code != 0 || names != expected || rows.iter().any(|r| r.result != "PASS") {
            let _ = writeln!(report, "{} (exit {code}):\n{all}", suite.display());
        }
    }
    assert!(report.is_empty(), "{report}");
    // And all at once, given as gator takes a tree of suites.
    let (code, rows, all) = portcullis_test(Path::new("tests/fixtures/gatekeeper/..."));
    assert_eq!(code, 0, "{all}");
    assert_eq!(rows.len(), total, "{all}");
    let summary = all.lines().rfind(|l| l.contains(" passed, ")).unwrap();
    assert_eq!(summary, format!("{total} passed, 0 failed, 0 errors"));
}

#[test]
fn gator_semantics_suite_passes() {
    let (code, rows, all) = portcullis_test(&gator_suites().join("semantics/suite.yaml"));
    assert_eq!(code, 0, "{all}");
    assert!(
        all.contains("\n19 passed, 0 failed, 0 errors, 2 skipped\n"),
        "{all}"
    );
    for case in [
        "deny/labelled-namespace",
        "deny/unlabelled-namespace",
        "deny/configmap-lacks-owner",
        "deny/admission-review-update",
        "dryrun-is-counted/unlabelled-namespace",
        "warn-is-counted/configmap-lacks-owner",
        "scoped-at-gator-counts-once/unlabelled-namespace",
        "webhook-only-gives-nothing-at-gator/unlabelled-namespace",
        "objects-as-written/namespaced-object-without-namespace",
        "objects-as-written/cluster-scoped-object-with-namespace",
        "namespace-selector/labelled-namespace-in-inventory",
        "namespace-selector/unlabelled-namespace-in-inventory",
        "namespace-selector/namespace-not-in-inventory-is-an-autoreject",
        "namespace-selector/object-without-namespace-is-not-namespaced-for-gator",
        "namespace-selector/cluster-scoped-object-with-namespace-is-namespaced-for-gator",
        "namespaces-as-written/no-metadata-name-label-unless-written",
        "rego-runtime-error-of-a-complete-rule/one-violation-naming-the-line",
        "rego-runtime-error-of-a-function/one-violation-naming-the-line",
    ] {
        assert_eq!(row(&rows, case, &all).result, "PASS", "{all}");
    }
    let invalid = row(&rows, "schema-refuses-the-parameters", &all);
    assert_eq!(invalid.result, "PASS", "{all}");
    assert!(
        invalid
            .reason
            .contains("spec.parameters.labels in body must be of type array"),
        "{all}"
    );
    for skipped in ["deny/skipped-case-is-not-read", "skipped-test-is-not-read"] {
        let row = row(&rows, skipped, &all);
        assert_eq!(
            (row.result.as_str(), row.reason.as_str()),
            ("SKIP", "skip: true")
        );
    }
}

#[test]
fn failing_assertions_are_reported() {
    let (code, rows, all) = portcullis_test(&gator_suites().join("failing"));
    assert_eq!(code, 1, "{all}");
    assert!(all.contains("\n1 passed, 5 failed, 0 errors\n"), "{all}");
    assert_eq!(row(&rows, "deny/holds", &all).result, "PASS");
    let expected = [
        (
            "deny/wrong-count",
            "assertions[0]: got 2 violations but want exactly 1; messages: [\"Namespace scratch \
             has no owner label (operation \\\"\\\")\", \"Namespace scratch has no team label \
             (operation \\\"\\\")\"]",
        ),
        (
            "deny/message-matches-nothing",
            "assertions[0]: got 0 violations containing \"^ConfigMap settings has no team label\" \
             but want at least 1; messages: [\"ConfigMap settings has no owner label (operation \
             \\\"\\\")\"]",
        ),
        (
            "deny/second-assertion-fails",
            "assertions[1]: got 1 violations containing \"owner\" but want none; messages: [",
        ),
        (
            "deny/labelled-object-has-violations-wanted",
            "assertions[0]: got 0 violations but want at least 1; messages: []",
        ),
        (
            "valid-constraint-marked-invalid",
            "constraint should have failed schema validation: it loads",
        ),
    ];
    for (case, reason) in expected {
        let row = row(&rows, case, &all);
        assert_eq!(row.result, "FAIL", "{all}");
        assert!(
            row.reason.starts_with(reason),
            "{case}: {reason:?} in\n{all}"
        );
    }
}

#[test]
fn cases_that_cannot_run_are_errors() {
    let (code, rows, all) = portcullis_test(&gator_suites().join("broken/suite.yaml"));
    assert_eq!(code, 2, "{all}");
    assert!(all.contains("\n0 passed, 0 failed, 9 errors\n"), "{all}");
    let expected = [
        (
            "cases/missing-object-file",
            "objects/does-not-exist.yaml: cannot read",
        ),
        (
            "cases/two-objects-in-the-file",
            "object file must contain exactly one object: tests/fixtures/gator-suites/objects/two-configmaps.yaml defines 2 objects",
        ),
        (
            "cases/no-assertions",
            "invalid Case: assertions must be non-empty",
        ),
        (
            "cases/bad-regular-expression",
            "assertions[0]: message contains invalid regular expression \"owner (\": unclosed group",
        ),
        (
            "cases/violations-neither-a-count-nor-yes-or-no",
            "assertions[0]: violations must be a nonnegative integer, \"yes\" or \"no\"",
        ),
        (
            "missing-template",
            "cannot read tests/fixtures/gator-suites/no-such-template.yaml",
        ),
        (
            "constraint-is-a-template",
            "not a Constraint (constraints.gatekeeper.sh): templates.gatekeeper.sh/v1 ConstraintTemplate",
        ),
        (
            "expansion-is-not-an-expansion-template",
            "not an Expansion Template: \"tests/fixtures/gator-suites/template.yaml\"",
        ),
        (
            "object-cannot-be-expanded/configmap-without-the-source",
            "expanding resource settings: error expanding resource settings: could not find \
             source field \"spec.template\" in resource settings",
        ),
    ];
    for (case, reason) in expected {
        let row = row(&rows, case, &all);
        assert_eq!(row.result, "ERROR", "{all}");
        assert!(row.reason.contains(reason), "{case}: {reason:?} in\n{all}");
    }
}

/// A case's (or a test's, when gator lists no case of it) outcome in `gator verify -v`:
/// PASS, FAIL or SKIP, and the failure's first line.
fn gator_verify(gator: &Path, path: &Path) -> (BTreeMap<String, (String, String)>, String) {
    let output = Command::new(gator)
        .args(["verify", "-v"])
        .arg(path)
        .current_dir(ROOT)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    let mut cases = BTreeMap::new();
    let mut tests = BTreeMap::new();
    let mut test = "";
    let outcome = |rest: &str, index: usize| {
        let (status, name) = rest.split_once(": ").unwrap();
        let name = name.rsplit_once('\t').map_or(name, |(name, _)| name);
        let detail = if status == "FAIL" {
            lines.get(index + 1).map_or("", |l| l.trim()).to_owned()
        } else {
            String::new()
        };
        (name.to_owned(), (status.to_owned(), detail))
    };
    for (index, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("=== RUN   ") {
            test = name;
        } else if let Some(name) = line.strip_prefix("=== SKIP  ") {
            tests.insert(name.to_owned(), ("SKIP".to_owned(), String::new()));
        } else if let Some(name) = line.strip_prefix("    === SKIP  ") {
            cases.insert(format!("{test}/{name}"), ("SKIP".to_owned(), String::new()));
        } else if let Some(rest) = line.strip_prefix("    --- ") {
            let (name, result) = outcome(rest, index);
            cases.insert(format!("{test}/{name}"), result);
        } else if let Some(rest) = line.strip_prefix("--- ") {
            let (name, result) = outcome(rest, index);
            tests.insert(name, result);
        }
    }
    for (name, result) in tests {
        let prefix = format!("{name}/");
        if !cases.keys().any(|case| case.starts_with(&prefix)) {
            cases.insert(name, result);
        }
    }
    (cases, stdout)
}

#[test]
fn gator_verify_agrees_case_by_case() {
    let Some(gator) = gator() else { return };
    let mut suites: Vec<PathBuf> = scenarios().iter().map(|s| s.join("suite.yaml")).collect();
    for name in ["semantics", "failing", "broken"] {
        suites.push(gator_suites().join(name).join("suite.yaml"));
    }
    let mut report = String::new();
    let mut compared = 0;
    for suite in suites {
        let (verified, gator_output) = gator_verify(&gator, &suite);
        let (_, rows, all) = portcullis_test(&suite);
        let ours: BTreeMap<String, String> =
            rows.into_iter().map(|row| (row.case, row.result)).collect();
        let names: Vec<&String> = verified.keys().chain(ours.keys()).collect();
        for name in names.into_iter().collect::<std::collections::BTreeSet<_>>() {
            compared += 1;
            let theirs = verified.get(name).map_or("absent", |(s, _)| s.as_str());
            let mine = ours.get(name).map_or("absent", String::as_str);
            let agree = match theirs {
                "FAIL" => mine == "FAIL" || mine == "ERROR",
                other => other == mine,
            };
            if !agree {
                let _ = writeln!(
                    report,
                    "{} {name}: gator {theirs}, portcullis {mine}",
                    suite.display()
                );
            }
        }
        if report.contains(&suite.display().to_string()) {
            let _ = writeln!(report, "gator:\n{gator_output}\nportcullis:\n{all}");
        }
    }
    println!("gator verify and portcullis test: {compared} cases compared");
    assert!(report.is_empty(), "{report}");
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The messages gator prints for a case that fails `violations: 0`: `got messages [a b]` (joined
/// by spaces, as Go prints a slice).
fn gator_messages(detail: &str) -> Option<String> {
    let (_, list) = detail.split_once("got messages [")?;
    Some(list.strip_suffix(']')?.to_owned())
}

/// The messages Portcullis prints for a failing assertion (`messages: [...]`, Rust's quoting,
/// read as JSON), joined as gator joins them.
fn portcullis_messages(reason: &str) -> Option<String> {
    let (_, list) = reason.rsplit_once("; messages: ")?;
    let messages: Vec<String> = serde_json::from_str(list)
        .unwrap_or_else(|e| panic!("messages {list:?} are not read as JSON: {e}"));
    Some(messages.join(" "))
}

#[test]
fn gator_verify_reports_the_same_violations() {
    let Some(gator) = gator() else { return };
    let work = tempfile::tempdir().unwrap();
    let mut report = String::new();
    let (mut cases, mut with_violations) = (0, 0);
    // (the folder to copy, the suite in it)
    let mut suites: Vec<(PathBuf, &str)> = scenarios()
        .into_iter()
        .map(|scenario| (scenario, "suite.yaml"))
        .collect();
    suites.push((Path::new(ROOT).join(gator_suites()), "semantics/suite.yaml"));
    for (scenario, suite_file) in suites {
        let copy = work.path().join(scenario.file_name().unwrap());
        copy_folder(&scenario, &copy);
        let suite_path = copy.join(suite_file);
        let mut suite = suite_value(&suite_path);
        for test in suite["tests"].as_array_mut().unwrap() {
            for case in test["cases"].as_array_mut().into_iter().flatten() {
                case["assertions"] = serde_json::json!([{"violations": 0}]);
            }
        }
        std::fs::write(&suite_path, serde_norway::to_string(&suite).unwrap()).unwrap();
        let (verified, gator_output) = gator_verify(&gator, &suite_path);
        let (_, rows, all) = portcullis_test(&suite_path);
        for row in rows
            .iter()
            .filter(|row| row.case.contains('/') && row.result != "SKIP")
        {
            cases += 1;
            let Some((status, detail)) = verified.get(&row.case) else {
                let _ = writeln!(report, "{}: not in gator's output", row.case);
                continue;
            };
            let theirs = (status.as_str(), gator_messages(detail));
            let ours = (row.result.as_str(), portcullis_messages(&row.reason));
            if theirs.0 == "FAIL" {
                with_violations += 1;
            }
            if theirs != ours {
                let _ = writeln!(
                    report,
                    "{}/{}:\n  gator:      {theirs:?}\n  portcullis: {ours:?}",
                    scenario.display(),
                    row.case
                );
            }
        }
        if verified.len() < rows.len() {
            let _ = writeln!(report, "gator ran fewer cases:\n{gator_output}\n{all}");
        }
    }
    println!(
        "gator verify and portcullis test report the same violations for {cases} cases \
         ({with_violations} with violations)"
    );
    assert!(cases > 250, "{cases} cases");
    assert!(report.is_empty(), "{report}");
}
