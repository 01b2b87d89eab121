//! `portcullis test` run as a process: the shipped example suites pass, and deliberately
//! failing or broken suites fail with the reason in the table and the right exit code.

use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn portcullis_test(paths: &[&str]) -> (i32, String, String) {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("test")
        .args(paths)
        .current_dir(ROOT)
        .output()
        .unwrap();
    (
        output.status.code().expect("exited by a signal"),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The row of the table for `case`.
fn row<'a>(table: &'a str, case: &str) -> &'a str {
    table
        .lines()
        .find(|line| line.contains(case))
        .unwrap_or_else(|| panic!("no row for {case:?} in\n{table}"))
}

#[test]
fn example_suites_pass() {
    let (code, table, stderr) = portcullis_test(&["examples/tests"]);
    assert_eq!(code, 0, "{table}{stderr}");
    let header = table.lines().next().unwrap();
    for column in ["SUITE", "CASE", "RESULT", "REASON"] {
        assert!(header.contains(column), "{header}");
    }
    for suite in ["builtin-pods", "builtin-workloads", "host-isolation"] {
        assert!(table.contains(suite), "{suite} did not run:\n{table}");
    }
    for case in [
        "privileged container is denied",
        "host network and PID namespaces are denied",
        "latest and missing tags are warned, not denied",
        "compliant pod is admitted with defaults applied",
        "a Deployment with a privileged template is warned about, not denied",
        "a CronJob sharing the host IPC namespace is warned about",
        "a CronJob sharing the host IPC namespace is denied",
    ] {
        assert!(row(&table, case).contains(" PASS"), "{table}");
    }
    let summary = table.lines().last().unwrap();
    assert!(
        summary.ends_with(" passed, 0 failed, 0 errors"),
        "{summary}"
    );
    assert!(
        !table.contains("FAIL") && !table.contains("ERROR"),
        "{table}"
    );
}

#[test]
fn a_failing_suite_exits_1_with_the_mismatches() {
    let (code, table, _) = portcullis_test(&["tests/fixtures/check/suites/failing.yaml"]);
    assert_eq!(code, 1, "{table}");
    let allowed = row(&table, "privileged pod expected allowed");
    assert!(allowed.contains(" FAIL "), "{allowed}");
    assert!(
        allowed.contains(
            "expected allowed: true, got false (violations: [pod-security/enforce] violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), privileged (container \"netdebug\" must not set securityContext.privileged=true))"
        ),
        "{allowed}"
    );
    let violation = row(&table, "wrong violation expected");
    assert!(
        violation.contains(
            "missing violation {rule: no-latest}; got: [pod-security/enforce] violates PodSecurity"
        ),
        "{violation}"
    );
    let patched = row(&table, "wrong warning count and patched object");
    assert!(
        patched.contains(
            "expected 0 warnings, got 2: [builtin-image-tags/pinned] spec.containers[0].image: container \"web\" image \"nginx:latest\" must have a tag other than latest; would violate PodSecurity \"restricted:latest\": "
        ),
        "{patched}"
    );
    assert!(
        patched.contains(
            "patched object differs at /spec/containers/0/imagePullPolicy: expected \"Never\", got \"Always\""
        ),
        "{patched}"
    );
    assert!(row(&table, "this one passes").contains(" PASS"), "{table}");
    assert_eq!(
        table.lines().last().unwrap(),
        "1 passed, 3 failed, 0 errors"
    );
}

#[test]
fn suites_with_reviews_and_policy_files() {
    let (code, table, _) =
        portcullis_test(&["tests/fixtures/check/suites/reviews-and-policies.yaml"]);
    assert_eq!(code, 0, "{table}");
    assert_eq!(
        table.lines().last().unwrap(),
        "3 passed, 0 failed, 0 errors"
    );
}

#[test]
fn suites_that_cannot_be_loaded_exit_2() {
    let cases = [
        (
            "tests/fixtures/check/suites/broken.yaml",
            "tests/fixtures/check/suites/broken.yaml (document 0): cases[0].expect.alowed: unknown field `alowed`",
        ),
        (
            "tests/fixtures/check/suites/unmatched.yaml",
            "tests/fixtures/check/suites/unmatched.yaml (document 0): cases[0].resource: no resource is Pod team-b/web",
        ),
        (
            "tests/fixtures/check/pods.yaml",
            "holds no PolicyTest (kinds: Namespace, Pod, ConfigMap)",
        ),
        (
            "tests/fixtures/check/bad",
            "no PolicyTest found in this folder",
        ),
        ("tests/fixtures/check/no-such-suite.yaml", "cannot read:"),
    ];
    for (path, reason) in cases {
        let (code, table, _) = portcullis_test(&[path]);
        assert_eq!(code, 2, "{path}: {table}");
        assert!(table.contains(" ERROR "), "{path}: {table}");
        assert!(
            table.contains(reason),
            "{path}: expected {reason:?} in\n{table}"
        );
    }
    // An error outweighs failures and passes elsewhere in the run.
    let (code, table, _) = portcullis_test(&[
        "tests/fixtures/check/suites/failing.yaml",
        "tests/fixtures/check/suites/broken.yaml",
        "examples/tests",
    ]);
    assert_eq!(code, 2, "{table}");
    assert!(
        table
            .lines()
            .last()
            .unwrap()
            .ends_with(" passed, 3 failed, 1 errors"),
        "{table}"
    );
}

/// `--compare-engines`: a template that carries both K8sNativeValidation and Rego runs its
/// CEL code (as Gatekeeper does); with the flag, each case runs through both engines and one
/// whose engines give different numbers of violations fails.
#[test]
fn compare_engines_reports_cases_where_cel_and_rego_disagree() {
    let suite = "tests/fixtures/gatekeeper/cel-and-rego/suite.yaml";
    let (code, table, stderr) = portcullis_test(&[suite]);
    assert_eq!(code, 0, "{table}{stderr}");
    let (code, table, stderr) = portcullis_test(&["--compare-engines", suite]);
    assert_eq!(code, 1, "{table}{stderr}");
    // The Rego code also asks for an `app` label, the CEL code does not.
    let disagreeing = row(&table, "dual-owner/rego-only-rule-not-run");
    assert!(
        disagreeing.contains("FAIL")
            && disagreeing
                .contains("the engines disagree: K8sNativeValidation gave 0 violations [], Rego 1"),
        "{table}"
    );
    // Where both engines find as many violations, the case still passes.
    assert!(
        row(&table, "dual-owner/service").contains("PASS"),
        "{table}"
    );
    // Only cases of templates with both engines can disagree.
    let failing: Vec<&str> = table
        .lines()
        .filter(|line| line.contains(" FAIL "))
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert!(
        failing.iter().all(|case| case.starts_with("dual-")),
        "{table}"
    );
}
