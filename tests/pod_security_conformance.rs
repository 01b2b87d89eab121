//! Conformance with upstream Pod Security Admission: every Pod fixture of
//! `k8s.io/pod-security-admission` v0.37.2 (`test/testdata/{baseline,restricted}/v1.N/{pass,fail}`)
//! is evaluated with `check_pod` at its folder's level and version.
//!
//! - a pass fixture must pass;
//! - a fail fixture must fail, with the message upstream's own test expects (it names the check
//!   its file name starts with, or the restricted check that replaces it at that version), and
//!   with exactly the detail upstream gives (`tests/fixtures/pod_security/messages.tsv`, made
//!   by running upstream's evaluator; see `generate/` there);
//! - fixtures of the newest version give the same answers at `latest` and at newer minors.
//!
//! Upstream's own test creates the fixtures through an apiserver, so they are evaluated after
//! its defaulting; here each fixture goes through the product's own manifest path
//! (`Manifest::from_object`, then `Manifest::defaulted`, as `portcullis check` does), so the
//! defaults a fixture relies on (a volume without a source becomes an `emptyDir`) come from
//! Portcullis, not from this test.
//!
//! The fixtures come from `scripts/fetch-psa-fixtures.sh` (Go's module download, cached outside
//! git), or from `PORTCULLIS_PSA_TESTDATA` (the module directory or its `test/testdata`). Without
//! Go the test is skipped, unless `CI` is set.

#[path = "common/allocations.rs"]
mod allocations;

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use portcullis::admission::{JsonRead, ObjectView};
use portcullis::engine::pod_security::{
    CheckFailure, LATEST_MINOR, Level, LevelVersion, Version, check_pod, violation_message,
};
use portcullis::offline::{Manifest, Source};
use serde_json::Value;

use allocations::allocations_of;

/// What upstream's test expects of a fail fixture, by the check ID its file name starts with
/// (lowercased): the check, and the text the denial must contain (upstream's
/// `expectErrorSubstring`, or the check ID).
const EXPECTATIONS: &[(&str, &str)] = &[
    ("allowPrivilegeEscalation", "allowPrivilegeEscalation"),
    ("appArmorProfile", "forbidden AppArmor profile"),
    ("capabilities_baseline", "capabilities"),
    ("capabilities_restricted", "unrestricted capabilities"),
    ("hostNamespaces", "host namespaces"),
    ("hostPathVolumes", "hostPath"),
    ("hostPorts", "hostPort"),
    ("hostProbesAndHostLifecycle", "probe or lifecycle host"),
    ("privileged", "privileged"),
    ("procMount", "procMount"),
    ("procMount_restricted", "procMount"),
    ("restrictedVolumes", "restricted volume types"),
    ("runAsNonRoot", "runAsNonRoot"),
    ("runAsUser", "runAsUser"),
    ("seLinuxOptions", "seLinuxOptions"),
    ("seccompProfile_baseline", "seccompProfile"),
    ("seccompProfile_restricted", "seccompProfile"),
    ("sysctls", "forbidden sysctl"),
    ("windowsHostProcess", "hostProcess"),
];

/// Baseline checks that a restricted check replaces at restricted, from a minor on: a
/// restricted fail fixture of the baseline check fails the replacement instead.
const REPLACEMENTS: &[(&str, &str, u32)] = &[
    ("capabilities_baseline", "capabilities_restricted", 22),
    ("hostPathVolumes", "restrictedVolumes", 0),
    ("procMount", "procMount_restricted", 35),
    ("seccompProfile_baseline", "seccompProfile_restricted", 19),
];

/// The Pod as `portcullis check` would send it for admission: recognised as a manifest and
/// defaulted by the product.
fn as_admitted(path: &Path, pod: Value) -> Value {
    let source = Source {
        file: path.to_path_buf(),
        index: 0,
        item: None,
    };
    let manifest =
        Manifest::from_object(&source, pod).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    manifest.defaulted().object.clone()
}

/// Upstream's answers: (level, minor, file name) → aggregate detail.
type Golden = HashMap<(String, u32, String), String>;

fn minor_of(version: &str) -> Option<u32> {
    version.strip_prefix("v1.")?.parse().ok()
}

fn load_golden() -> Golden {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pod_security/messages.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut golden = Golden::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let fields: Vec<&str> = line.splitn(5, '\t').collect();
        let [level, first, last, file, detail] = fields[..] else {
            panic!("{}: malformed line {line:?}", path.display());
        };
        let (Some(first), Some(last)) = (minor_of(first), minor_of(last)) else {
            panic!("{}: bad versions in {line:?}", path.display());
        };
        for minor in first..=last {
            golden.insert(
                (level.to_owned(), minor, file.to_owned()),
                detail.to_owned(),
            );
        }
    }
    golden
}

/// Writes past the test harness's output capture, so counts and skips show in `cargo test`.
fn report(message: &str) {
    let _ = writeln!(std::io::stderr(), "pod_security_conformance: {message}");
}

/// The `test/testdata` folder, or `None` when the test is to be skipped.
fn testdata_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PORTCULLIS_PSA_TESTDATA") {
        let dir = PathBuf::from(dir);
        let nested = dir.join("test/testdata");
        return Some(if nested.is_dir() { nested } else { dir });
    }
    let has_go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !has_go {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but Go is not installed: the upstream Pod Security fixtures cannot be \
             fetched (install Go or set PORTCULLIS_PSA_TESTDATA)"
        );
        report(
            "SKIPPED: Go is not installed, so the upstream fixtures cannot be fetched \
             (install Go or set PORTCULLIS_PSA_TESTDATA; with CI set this fails)",
        );
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-psa-fixtures.sh");
    let output = Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} failed ({}):\n{}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).expect("script output is UTF-8");
    let module_dir = stdout
        .lines()
        .last()
        .expect("the script prints the module directory");
    Some(Path::new(module_dir).join("test/testdata"))
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .collect();
    entries.sort();
    entries
}

/// The check a fail fixture is for: its file name without the index, matched to
/// [`EXPECTATIONS`] (upstream names the files after the lowercased check ID).
fn expectation(file: &str) -> Option<(&'static str, &'static str)> {
    let stem = file.strip_suffix(".yaml")?;
    let prefix = stem.trim_end_matches(|c: char| c.is_ascii_digit());
    EXPECTATIONS
        .iter()
        .copied()
        .find(|(id, _)| id.to_lowercase() == prefix)
}

/// The checks a fail fixture for `id` may fail at `level` and `minor`.
fn accepted_ids(id: &'static str, level: Level, minor: u32) -> Vec<&'static str> {
    let mut ids = vec![id];
    if level == Level::Restricted {
        ids.extend(
            REPLACEMENTS
                .iter()
                .filter(|(replaced, _, since)| *replaced == id && minor >= *since)
                .map(|(_, replacement, _)| *replacement),
        );
    }
    ids
}

fn detail_of(level_version: LevelVersion, failures: &[CheckFailure]) -> String {
    let message = violation_message(level_version, failures);
    let prefix = format!("violates PodSecurity \"{level_version}\": ");
    message
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("message {message:?} does not start with {prefix:?}"))
        .to_owned()
}

#[derive(Default)]
struct Counts {
    pass: usize,
    fail: usize,
}

#[test]
fn upstream_fixtures() {
    let Some(testdata) = testdata_dir() else {
        return;
    };
    assert!(
        testdata.is_dir(),
        "no fixtures folder at {}",
        testdata.display()
    );
    let golden = load_golden();
    let mut used_golden = 0;
    let mut problems: Vec<String> = Vec::new();
    let mut counts: Vec<(Level, Counts)> = Vec::new();

    for level in [Level::Baseline, Level::Restricted] {
        let mut level_counts = Counts::default();
        let level_dir = testdata.join(level.as_str());
        for version_dir in sorted_entries(&level_dir) {
            let version_name = version_dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let minor = minor_of(&version_name)
                .unwrap_or_else(|| panic!("unexpected folder {}", version_dir.display()));
            let level_version = LevelVersion::new(level, Version::Minor(minor));
            // The newest fixtures also stand for `latest` and for minors not known yet.
            let mut also: Vec<LevelVersion> = Vec::new();
            if minor == LATEST_MINOR {
                also.push(LevelVersion::new(level, Version::Latest));
                also.push(LevelVersion::new(level, Version::Minor(LATEST_MINOR + 1)));
            }
            for (outcome, expect_fail) in [("pass", false), ("fail", true)] {
                let dir = version_dir.join(outcome);
                if !dir.is_dir() {
                    continue;
                }
                for path in sorted_entries(&dir) {
                    let file = path.file_name().unwrap().to_string_lossy().into_owned();
                    if !file.ends_with(".yaml") {
                        continue;
                    }
                    let shown = format!("{}/{version_name}/{outcome}/{file}", level.as_str());
                    let text = std::fs::read_to_string(&path)
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    let pod: Value = serde_norway::from_str(&text)
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    let pod = as_admitted(&path, pod);
                    let (metadata, spec) = (pod.get("metadata"), pod.get("spec"));
                    let failures = check_pod(level_version, metadata, spec);
                    // The same pod read from an object view fails the same checks.
                    let view = ObjectView::parse(&pod.to_string()).unwrap();
                    let root = view.root();
                    let from_view =
                        check_pod(level_version, root.get("metadata"), root.get("spec"));
                    if from_view != failures {
                        problems.push(format!("{shown}: read from a view: {from_view:?}"));
                    }

                    for other in &also {
                        let again = check_pod(*other, metadata, spec);
                        if again != failures {
                            problems.push(format!("{shown}: differs at {other}: {again:?}"));
                        }
                    }

                    if !expect_fail {
                        level_counts.pass += 1;
                        if !failures.is_empty() {
                            problems.push(format!(
                                "{shown}: should pass, got: {}",
                                violation_message(level_version, &failures)
                            ));
                        }
                        continue;
                    }
                    level_counts.fail += 1;
                    if failures.is_empty() {
                        problems.push(format!("{shown}: should fail, passed"));
                        continue;
                    }
                    let message = violation_message(level_version, &failures);
                    match expectation(&file) {
                        None => problems.push(format!("{shown}: no known check for this file")),
                        Some((id, substring)) => {
                            if !message.contains(substring) {
                                problems.push(format!(
                                    "{shown}: message lacks {substring:?}: {message}"
                                ));
                            }
                            let accepted = accepted_ids(id, level, minor);
                            if !failures.iter().any(|f| accepted.contains(&f.id)) {
                                let got: Vec<_> = failures.iter().map(|f| f.id).collect();
                                problems.push(format!(
                                    "{shown}: expected a failure of {accepted:?}, got {got:?}"
                                ));
                            }
                        }
                    }
                    let detail = detail_of(level_version, &failures);
                    match golden.get(&(level.as_str().to_owned(), minor, file.clone())) {
                        None => problems.push(format!("{shown}: not in messages.tsv")),
                        Some(expected) => {
                            used_golden += 1;
                            if *expected != detail {
                                problems.push(format!(
                                    "{shown}: detail differs from upstream\n  upstream: \
                                     {expected}\n  ours:     {detail}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        counts.push((level, level_counts));
    }

    let total: usize = counts.iter().map(|(_, c)| c.pass + c.fail).sum();
    let per_level: Vec<String> = counts
        .iter()
        .map(|(level, c)| {
            format!(
                "{level} {} ({} pass, {} fail)",
                c.pass + c.fail,
                c.pass,
                c.fail
            )
        })
        .collect();
    report(&format!(
        "checked {total} fixtures: {} from {}",
        per_level.join(", "),
        testdata.display()
    ));
    assert!(
        counts.iter().all(|(_, c)| c.pass > 0 && c.fail > 0),
        "no fixtures found under {}",
        testdata.display()
    );
    if used_golden != golden.len() {
        problems.push(format!(
            "messages.tsv has {} entries, {used_golden} matched a fixture",
            golden.len()
        ));
    }
    assert!(
        problems.is_empty(),
        "{} problems with upstream fixtures; the first ones:\n{}",
        problems.len(),
        problems
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn compliant_pods_are_checked_without_allocating() {
    let pod: Value = serde_json::json!({
        "metadata": {"annotations": {"example.com/team": "payments"}},
        "spec": {
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
                "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}],
            },
            "initContainers": [{"name": "init", "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
            }}],
            "containers": [{
                "name": "app",
                "ports": [{"containerPort": 8080}],
                "livenessProbe": {"httpGet": {"port": 8080, "path": "/healthz"}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                    "readOnlyRootFilesystem": true,
                },
            }],
            "volumes": [
                {"name": "tmp", "emptyDir": {}},
                {"name": "config", "configMap": {"name": "app"}},
            ],
        },
    });
    let (metadata, spec) = (pod.get("metadata"), pod.get("spec"));
    let view = ObjectView::parse(&pod.to_string()).unwrap();
    let (view_metadata, view_spec) = (view.root().get("metadata"), view.root().get("spec"));
    // The first check of the process resolves which checks run at every level and version
    // (a table kept for the process; a configuration resolves it when it is compiled).
    check_pod(
        LevelVersion::new(Level::Restricted, Version::Latest),
        metadata,
        spec,
    );
    let mut versions = vec![Version::Latest];
    versions.extend((0..=LATEST_MINOR + 1).map(Version::Minor));
    for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
        for version in &versions {
            let level_version = LevelVersion::new(level, *version);
            let mut failures = Vec::new();
            let allocated = allocations_of(|| failures = check_pod(level_version, metadata, spec));
            assert_eq!(failures, [], "{level_version}");
            assert_eq!(allocated, 0, "{level_version} allocated");
            let allocated = allocations_of(|| {
                failures = check_pod(level_version, view_metadata, view_spec);
            });
            assert_eq!(failures, [], "{level_version}, from a view");
            assert_eq!(allocated, 0, "{level_version} allocated, from a view");
        }
    }
}
