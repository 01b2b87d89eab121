//! Gatekeeper ConstraintTemplates and Constraints, judged by Gatekeeper's own `gator` CLI
//! (v3.23.1, built from the Go module proxy by `e2e/build-gator.sh`; `PORTCULLIS_GATOR` names
//! the binary). The scenarios are the folders of `tests/fixtures/gatekeeper/` (README.md there:
//! layout, coverage, and how gator builds `input.review`).
//!
//! - `every_scenario_has_the_layout_the_harness_reads` (no gator needed): the folders are what
//!   the other tests read.
//! - `gator_verify_passes_on_every_suite`: `gator verify` passes every scenario's suite, so the
//!   suites' assertions are Gatekeeper's real behaviour.
//! - `portcullis_agrees_with_gator_test`: per
//!   object, the set of (constraint name, message, enforcementAction) from `gator test -o json`
//!   and from `portcullis check --output json`; every disagreement is printed, then the test
//!   fails if there is any.
//! - `portcullis_meets_the_suites_assertions`: every suite case, with its
//!   test's template and constraint, through `portcullis check`, against the suite's own
//!   assertions. It covers what `gator test` cannot show: AdmissionReview cases (operation,
//!   userInfo, DELETE) and cluster-scoped objects, which `gator test` reviews with an empty
//!   Namespace attached.
//!
//! Without `PORTCULLIS_GATOR` the gator tests are skipped with a message, except under
//! `CI=true`, where they fail. Everything runs as local processes on fixture files.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::gator;
use serde::Deserialize;
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PORTCULLIS: &str = env!("CARGO_BIN_EXE_portcullis");

/// The scenarios the fixtures hold (a new folder must be added here, so none is skipped
/// silently).
const SCENARIOS: &[&str] = &[
    "allowed-registries",
    "cel-and-rego",
    "cel-basics",
    "cel-failure-policy",
    "cel-request",
    "container-limits-lib",
    "enforcement-actions",
    "expansion",
    "inventory",
    "match-kinds-scope",
    "match-name-source",
    "match-namespaces",
    "match-selectors",
    "request-context",
    "required-labels",
];

fn fixtures() -> PathBuf {
    Path::new(ROOT).join("tests/fixtures/gatekeeper")
}

/// A scenario folder: its suite and the documents of its subfolders.
struct Scenario {
    name: &'static str,
    dir: PathBuf,
    templates: Vec<PathBuf>,
    constraints: Vec<PathBuf>,
    objects: Vec<PathBuf>,
    /// ExpansionTemplates (`expansion/`; most scenarios have none).
    expansions: Vec<PathBuf>,
}

impl Scenario {
    /// The folders `portcullis check` reads as policies (and `gator test` with `-f`).
    fn policy_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.dir.join("templates"), self.dir.join("constraints")];
        if !self.expansions.is_empty() {
            dirs.push(self.dir.join("expansion"));
        }
        dirs
    }
}

/// The YAML and JSON files of `dir`, sorted (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    found.sort();
    found
}

fn scenarios() -> Vec<Scenario> {
    SCENARIOS
        .iter()
        .map(|&name| {
            let dir = fixtures().join(name);
            Scenario {
                name,
                templates: files(&dir.join("templates")),
                constraints: files(&dir.join("constraints")),
                objects: files(&dir.join("objects")),
                expansions: files(&dir.join("expansion")),
                dir,
            }
        })
        .collect()
}

/// The documents of a YAML (or JSON) file, empty documents left out.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|document| {
            Value::deserialize(document).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .filter(|value| !value.is_null())
        .collect()
}

/// The one document of a file.
fn document(path: &Path) -> Value {
    let mut all = documents(path);
    assert_eq!(all.len(), 1, "{}: one document expected", path.display());
    all.remove(0)
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// What a result is about: kind, namespace and name ("" where absent, as for the namespace of a
/// cluster-scoped object or the name of an object with only generateName).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ObjectKey {
    kind: String,
    namespace: String,
    name: String,
}

impl ObjectKey {
    fn of(object: &Value) -> Self {
        ObjectKey {
            kind: text(&object["kind"]),
            namespace: text(&object["metadata"]["namespace"]),
            name: text(&object["metadata"]["name"]),
        }
    }

    /// A cluster-scoped object other than a Namespace.
    fn cluster_scoped(&self) -> bool {
        self.namespace.is_empty() && self.kind != "Namespace"
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.namespace.as_str(), self.name.as_str()) {
            ("", name) => write!(f, "{} {name}", self.kind),
            (namespace, "") => write!(f, "{} {namespace}/(generateName)", self.kind),
            (namespace, name) => write!(f, "{} {namespace}/{name}", self.kind),
        }
    }
}

/// One finding: the constraint's name, Gatekeeper's message (without portcullis's
/// `[name] ` prefix) and the enforcement action.
type Finding = (String, String, String);

fn run(command: &mut Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn every_scenario_has_the_layout_the_harness_reads() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = SCENARIOS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(on_disk, listed, "SCENARIOS must name every fixture folder");

    for scenario in scenarios() {
        let name = scenario.name;
        assert!(
            scenario.dir.join("suite.yaml").is_file(),
            "{name}: no suite.yaml"
        );
        let suite = document(&scenario.dir.join("suite.yaml"));
        assert_eq!(suite["apiVersion"], "test.gatekeeper.sh/v1alpha1", "{name}");
        assert_eq!(suite["kind"], "Suite", "{name}");
        assert!(!scenario.templates.is_empty(), "{name}: no templates");
        assert!(!scenario.constraints.is_empty(), "{name}: no constraints");
        assert!(!scenario.objects.is_empty(), "{name}: no objects");

        let mut kinds = BTreeSet::new();
        for path in &scenario.templates {
            let template = document(path);
            assert_eq!(
                template["apiVersion"], "templates.gatekeeper.sh/v1",
                "{path:?}"
            );
            assert_eq!(template["kind"], "ConstraintTemplate", "{path:?}");
            let kind = text(&template["spec"]["crd"]["spec"]["names"]["kind"]);
            assert_eq!(
                text(&template["metadata"]["name"]),
                kind.to_lowercase(),
                "{path:?}: a template's name is its kind in lower case"
            );
            kinds.insert(kind);
        }
        let mut constraint_names = BTreeSet::new();
        for path in &scenario.constraints {
            let constraint = document(path);
            assert_eq!(
                constraint["apiVersion"], "constraints.gatekeeper.sh/v1beta1",
                "{path:?}"
            );
            assert!(
                kinds.contains(&text(&constraint["kind"])),
                "{path:?}: kind of no template"
            );
            assert!(
                constraint_names.insert(text(&constraint["metadata"]["name"])),
                "{path:?}: constraint names are unique in a scenario"
            );
        }
        for path in &scenario.expansions {
            for template in documents(path) {
                assert_eq!(
                    template["apiVersion"], "expansion.gatekeeper.sh/v1beta1",
                    "{path:?}"
                );
                assert_eq!(template["kind"], "ExpansionTemplate", "{path:?}");
            }
        }
        let mut keys = BTreeSet::new();
        for path in &scenario.objects {
            let object = document(path);
            assert!(
                keys.insert(ObjectKey::of(&object)),
                "{path:?}: (kind, namespace, name) must be unique in a scenario"
            );
        }
    }
}

#[test]
fn gator_verify_passes_on_every_suite() {
    let Some(gator) = gator() else { return };
    let mut failures = String::new();
    for scenario in scenarios() {
        let output = run(Command::new(&gator)
            .arg("verify")
            .arg(&scenario.dir)
            .current_dir(ROOT));
        let stdout = String::from_utf8_lossy(&output.stdout);
        if output.status.success() && stdout.contains("\nPASS") {
            println!("gator verify {}: PASS", scenario.name);
        } else {
            let _ = writeln!(
                failures,
                "gator verify {} failed ({}):\n{stdout}{}",
                scenario.name,
                output.status,
                stderr(&output)
            );
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// `gator test -o json` on the scenario's templates, constraints, ExpansionTemplates and
/// objects: the exit code and the results (gator prints `null` for none).
fn gator_test(gator: &Path, scenario: &Scenario) -> (i32, Vec<Value>) {
    let mut command = Command::new(gator);
    command.arg("test");
    for dir in scenario.policy_dirs() {
        command.arg("-f").arg(dir);
    }
    let output = run(command
        .args(["-f".as_ref(), scenario.dir.join("objects").as_os_str()])
        .args(["-o", "json"]));
    let code = output.status.code().expect("gator exited by a signal");
    assert!(
        code == 0 || code == 1,
        "gator test {}: exit {code}: {}",
        scenario.name,
        stderr(&output)
    );
    let results: Option<Vec<Value>> = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "gator test {}: {e}; stderr: {}",
            scenario.name,
            stderr(&output)
        )
    });
    (code, results.unwrap_or_default())
}

/// `portcullis check --output json --policies P… OBJECTS…`: the exit code and the
/// per-document results, or why there are none (an exit code other than 0 and 1, or output
/// that is not a JSON array), first line only.
fn portcullis_check(
    policies: &[PathBuf],
    objects: &[PathBuf],
) -> Result<(i32, Vec<Value>), String> {
    let mut command = Command::new(PORTCULLIS);
    command
        .args(["check", "--output", "json"])
        .current_dir(ROOT)
        .env_remove("PORTCULLIS_POLICIES");
    for policy in policies {
        command.arg("--policies").arg(policy);
    }
    command.args(objects);
    let output = run(&mut command);
    let code = output.status.code().expect("portcullis exited by a signal");
    let first_line = || {
        stderr(&output)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    if code != 0 && code != 1 {
        return Err(format!("portcullis check: exit {code}: {}", first_line()));
    }
    let results = serde_json::from_slice(&output.stdout).map_err(|e| {
        format!(
            "portcullis check: output is not a JSON array: {e}; {}",
            first_line()
        )
    })?;
    Ok((code, results))
}

/// The object a `check` result is about.
fn result_key(result: &Value) -> ObjectKey {
    ObjectKey {
        kind: text(&result["kind"]),
        namespace: text(&result["namespace"]),
        name: text(&result["name"]),
    }
}

/// Splits portcullis's `[NAME] MESSAGE` into (NAME, MESSAGE); `None` when it is not so worded.
fn split_prefixed(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix('[')?;
    let (name, msg) = rest.split_once("] ")?;
    Some((name.to_owned(), msg.to_owned()))
}

/// The findings portcullis reports for one document: its violations (deny) and warnings (warn).
/// A violation or warning not worded as a Gatekeeper constraint's is kept whole, under the
/// name `?`, so that it shows up as a disagreement.
fn portcullis_findings(result: &Value) -> BTreeSet<Finding> {
    let mut findings = BTreeSet::new();
    for violation in result["violations"].as_array().into_iter().flatten() {
        let message = text(&violation["message"]);
        let policy = text(&violation["policy"]);
        let constraint = policy.split_once('/').map(|(_, name)| name.to_owned());
        match (split_prefixed(&message), constraint) {
            (Some((name, msg)), Some(constraint)) if name == constraint => {
                findings.insert((name, msg, "deny".to_owned()));
            }
            _ => {
                findings.insert((
                    "?".to_owned(),
                    format!("{policy}: {message}"),
                    "deny".to_owned(),
                ));
            }
        }
    }
    for warning in result["warnings"].as_array().into_iter().flatten() {
        let warning = text(warning);
        match split_prefixed(&warning) {
            Some((name, msg)) => findings.insert((name, msg, "warn".to_owned())),
            None => findings.insert(("?".to_owned(), warning, "warn".to_owned())),
        };
    }
    findings
}

/// The `spec.match` fields for which `gator test` reviews a cluster-scoped object (other than a
/// Namespace) differently from Gatekeeper's webhook, audit and `gator verify`: it attaches an
/// empty Namespace to it (pkg/gator/expand `NamespaceForResource`), so the object counts as
/// namespaced, in namespace "", with no namespace labels.
const FIELDS_GATOR_TEST_MISREADS_FOR_CLUSTER_SCOPED: &[&str] = &[
    "scope",
    "namespaces",
    "excludedNamespaces",
    "namespaceSelector",
];

#[test]
// enabled once check reads ConstraintTemplates
fn portcullis_agrees_with_gator_test() {
    let Some(gator) = gator() else { return };
    let mut report = String::new();
    let (mut compared, mut agreed, mut left_out, mut dryrun) = (0, 0, 0, 0);
    for scenario in scenarios() {
        // Constraints by name, and the documents portcullis reads as policies, not objects.
        let constraints: BTreeMap<String, Value> = scenario
            .constraints
            .iter()
            .map(|path| {
                let constraint = document(path);
                (text(&constraint["metadata"]["name"]), constraint)
            })
            .collect();
        let objects: Vec<ObjectKey> = scenario
            .objects
            .iter()
            .map(|path| ObjectKey::of(&document(path)))
            .collect();
        let misread = |object: &ObjectKey, constraint: &str| {
            object.cluster_scoped()
                && constraints.get(constraint).is_some_and(|c| {
                    FIELDS_GATOR_TEST_MISREADS_FOR_CLUSTER_SCOPED
                        .iter()
                        .any(|field| !c["spec"]["match"][*field].is_null())
                })
        };
        // Objects for which gator's decision (allowed, exit code) may rest on a misread match:
        // their `allowed` is checked against portcullis's own findings only.
        let affected = |object: &ObjectKey| constraints.keys().any(|c| misread(object, c));
        let any_affected = objects.iter().any(affected);

        let (gator_code, gator_results) = gator_test(&gator, &scenario);
        let mut expected: BTreeMap<ObjectKey, BTreeSet<Finding>> = objects
            .iter()
            .map(|key| (key.clone(), BTreeSet::new()))
            .collect();
        for result in &gator_results {
            let violating = &result["violatingObject"];
            let api_version = text(&violating["apiVersion"]);
            if api_version.starts_with("templates.gatekeeper.sh/")
                || api_version.starts_with("constraints.gatekeeper.sh/")
                || api_version.starts_with("expansion.gatekeeper.sh/")
            {
                // gator test reviews the policy documents too; portcullis reads them as policies.
                continue;
            }
            let key = ObjectKey::of(violating);
            let constraint = text(&result["constraint"]["metadata"]["name"]);
            let action = text(&result["enforcementAction"]);
            if misread(&key, &constraint) {
                left_out += 1;
                continue;
            }
            if action == "dryrun" {
                // Reported by neither violations nor warnings of `check`.
                dryrun += 1;
                continue;
            }
            let Some(findings) = expected.get_mut(&key) else {
                let _ = writeln!(
                    report,
                    "{}: gator reports {key}, which is none of the objects",
                    scenario.name
                );
                continue;
            };
            findings.insert((constraint, text(&result["msg"]), action));
        }

        let what = format!("scenario {}", scenario.name);
        let policies = scenario.policy_dirs();
        let (code, results) = match portcullis_check(&policies, &scenario.objects) {
            Ok(answer) => answer,
            Err(error) => {
                let _ = writeln!(report, "{what}: {error}");
                continue;
            }
        };
        let mut actual: BTreeMap<ObjectKey, (BTreeSet<Finding>, bool, bool)> = BTreeMap::new();
        for result in &results {
            let key = result_key(result);
            let mut findings = portcullis_findings(result);
            let denies = findings.iter().any(|(_, _, action)| action == "deny");
            findings.retain(|(constraint, _, _)| !misread(&key, constraint));
            let allowed = result["allowed"]
                .as_bool()
                .unwrap_or_else(|| panic!("{what}: {key}: `allowed` is not a boolean"));
            if actual
                .insert(key.clone(), (findings, allowed, denies))
                .is_some()
            {
                let _ = writeln!(report, "{what}: portcullis reports {key} twice");
            }
        }

        for (key, gator_findings) in &expected {
            compared += 1;
            let Some((findings, allowed, portcullis_denies)) = actual.remove(key) else {
                let _ = writeln!(report, "{what}: {key}: missing from portcullis's output");
                continue;
            };
            let denied = gator_findings.iter().any(|(_, _, action)| action == "deny");
            let mut lines = Vec::new();
            for (constraint, msg, action) in gator_findings.difference(&findings) {
                lines.push(format!(
                    "    only gator:      [{constraint}] {action}: {msg}"
                ));
            }
            for (constraint, msg, action) in findings.difference(gator_findings) {
                lines.push(format!(
                    "    only portcullis: [{constraint}] {action}: {msg}"
                ));
            }
            if allowed == portcullis_denies {
                lines.push(format!(
                    "    allowed: {allowed}, but portcullis's own violations say otherwise"
                ));
            } else if allowed == denied && !affected(key) {
                lines.push(format!(
                    "    allowed: portcullis {allowed}, gator denies: {denied}"
                ));
            }
            if lines.is_empty() {
                agreed += 1;
            } else {
                let _ = writeln!(report, "{what}: {key}:\n{}", lines.join("\n"));
            }
        }
        for key in actual.keys() {
            let _ = writeln!(
                report,
                "{what}: portcullis reports {key}, which is none of the objects"
            );
        }
        let portcullis_denied = results.iter().any(|r| r["allowed"] == false);
        if code != i32::from(portcullis_denied) {
            let _ = writeln!(
                report,
                "{what}: exit code {code}, but portcullis's results say allowed: {}",
                !portcullis_denied
            );
        } else if code != gator_code && !any_affected {
            let _ = writeln!(
                report,
                "{what}: exit code: portcullis {code}, gator test {gator_code}"
            );
        }
    }
    println!(
        "gator test vs portcullis check: {agreed}/{compared} objects agree; {dryrun} dryrun \
         findings not compared (check reports none); {left_out} gator findings on cluster-scoped \
         objects left out (scope/namespaces/namespaceSelector, see \
         FIELDS_GATOR_TEST_MISREADS_FOR_CLUSTER_SCOPED)"
    );
    assert!(report.is_empty(), "disagreements:\n{report}");
}

/// A suite file, as gator reads it (pkg/gator/verify/suite.go).
#[derive(Debug, Deserialize)]
struct Suite {
    tests: Vec<SuiteTest>,
}

#[derive(Debug, Deserialize)]
struct SuiteTest {
    name: String,
    template: String,
    constraint: String,
    expansion: Option<String>,
    #[serde(default)]
    invalid: bool,
    #[serde(default)]
    cases: Vec<SuiteCase>,
}

#[derive(Debug, Deserialize)]
struct SuiteCase {
    name: String,
    object: String,
    #[serde(default)]
    inventory: Vec<String>,
    assertions: Vec<Assertion>,
}

#[derive(Debug, Deserialize)]
struct Assertion {
    violations: Option<Value>,
    message: Option<String>,
}

/// Checks one assertion against the messages of one constraint, as gator's Assertion.Run does:
/// `violations` is a count, "yes" (default) or "no" of the messages `message` matches.
fn assertion_holds(assertion: &Assertion, messages: &[String]) -> Result<(), String> {
    let pattern = assertion
        .message
        .as_deref()
        .map(|m| regex::Regex::new(m).unwrap_or_else(|e| panic!("message regex {m:?}: {e}")));
    let matching = messages
        .iter()
        .filter(|m| pattern.as_ref().is_none_or(|p| p.is_match(m)))
        .count();
    let want = assertion
        .violations
        .clone()
        .unwrap_or_else(|| Value::from("yes"));
    let ok = match &want {
        Value::Number(n) => n.as_u64() == Some(matching as u64),
        Value::String(s) if s == "yes" => matching > 0,
        Value::String(s) if s == "no" => matching == 0,
        other => panic!("violations: {other} is neither a count nor yes/no"),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "violations {want} matching {:?}: got {matching} of {messages:?}",
            assertion.message.as_deref().unwrap_or("(any)")
        ))
    }
}

#[test]
// enabled once check reads ConstraintTemplates
fn portcullis_meets_the_suites_assertions() {
    // Needs no gator: `gator_verify_passes_on_every_suite` shows the assertions are gator's.
    let mut report = String::new();
    let (mut cases, mut passed, mut dryrun_tests) = (0, 0, 0);
    for scenario in scenarios() {
        let suite_text = std::fs::read_to_string(scenario.dir.join("suite.yaml")).unwrap();
        let suite: Suite = serde_norway::from_str(&suite_text)
            .unwrap_or_else(|e| panic!("{}/suite.yaml: {e}", scenario.name));
        for test in &suite.tests {
            let constraint_path = scenario.dir.join(&test.constraint);
            if test.invalid {
                // gator refuses the constraint (the template's schema): portcullis must too.
                cases += 1;
                let policies = [scenario.dir.join(&test.template), constraint_path];
                match portcullis_check(&policies, &scenario.objects[..1]) {
                    Err(_) => passed += 1,
                    Ok(_) => {
                        let _ = writeln!(
                            report,
                            "{}/{}: portcullis loads a constraint gator refuses",
                            scenario.name, test.name
                        );
                    }
                }
                continue;
            }
            let constraint = document(&constraint_path);
            let name = text(&constraint["metadata"]["name"]);
            if constraint["spec"]["enforcementAction"] == "dryrun" {
                // check reports dryrun findings nowhere: nothing to assert on.
                dryrun_tests += 1;
                continue;
            }
            let mut policies = vec![scenario.dir.join(&test.template), constraint_path];
            policies.extend(test.expansion.iter().map(|path| scenario.dir.join(path)));
            for case in &test.cases {
                cases += 1;
                let what = format!("{}/{}/{}", scenario.name, test.name, case.name);
                let object_path = scenario.dir.join(&case.object);
                let mut inputs = vec![object_path.clone()];
                for path in case.inventory.iter().map(|p| scenario.dir.join(p)) {
                    if !inputs.contains(&path) {
                        inputs.push(path);
                    }
                }
                let (_, results) = match portcullis_check(&policies, &inputs) {
                    Ok(answer) => answer,
                    Err(error) => {
                        // Most likely the policies do not load: one line for the whole test.
                        let _ = writeln!(report, "{what} and the test's later cases: {error}");
                        break;
                    }
                };
                let object = document(&object_path);
                let key = if object["kind"] == "AdmissionReview" {
                    let request = &object["request"];
                    let reviewed = if request["object"].is_null() {
                        &request["oldObject"]
                    } else {
                        &request["object"]
                    };
                    ObjectKey::of(reviewed)
                } else {
                    ObjectKey::of(&object)
                };
                // The result about the case object: by kind, namespace and name, else (an
                // AdmissionReview may be reported under its own kind) by source file.
                let keys: Vec<ObjectKey> = results.iter().map(result_key).collect();
                let file_name = case.object.rsplit('/').next().unwrap_or_default();
                let Some(result) = keys
                    .iter()
                    .position(|k| *k == key)
                    .or_else(|| {
                        results
                            .iter()
                            .position(|r| text(&r["source"]).contains(file_name))
                    })
                    .map(|index| &results[index])
                else {
                    let listed: Vec<String> = keys.iter().map(ToString::to_string).collect();
                    let _ = writeln!(report, "{what}: no result for {key} among {listed:?}");
                    continue;
                };
                let messages: Vec<String> = portcullis_findings(result)
                    .into_iter()
                    .filter(|(constraint, _, _)| *constraint == name || constraint == "?")
                    .map(|(_, msg, _)| msg)
                    .collect();
                let failures: Vec<String> = case
                    .assertions
                    .iter()
                    .filter_map(|a| assertion_holds(a, &messages).err())
                    .collect();
                if failures.is_empty() {
                    passed += 1;
                } else {
                    let _ = writeln!(report, "{what}:\n    {}", failures.join("\n    "));
                }
            }
        }
    }
    println!(
        "suite assertions on portcullis check: {passed}/{cases} cases pass; {dryrun_tests} dryrun \
         tests not run (check reports no dryrun findings)"
    );
    assert!(report.is_empty(), "cases failing:\n{report}");
}
