//! The Pod Security Standards (baseline and restricted), evaluated as upstream Pod Security
//! Admission (`k8s.io/pod-security-admission` v0.37.2, Kubernetes 1.37) evaluates them.
//!
//! Every check keeps its version history: a policy pinned to `v1.24` runs the checks as they
//! were in 1.24, `latest` (and any minor newer than [`LATEST_MINOR`]) runs the newest ones.
//! Reasons, details, check order and the aggregate message are upstream's, byte for byte, so a
//! denial reads the same as the apiserver's own.
//!
//! The pod is read straight from its JSON, with Go's decoding rules: a missing or `null` field
//! is the zero value (`false`, `""`, `0`) or a nil pointer, `{}` is a set pointer to an empty
//! struct. Values of the wrong JSON type, which the apiserver refuses to decode, read as unset.
//! A compliant pod is evaluated without allocating.

use std::fmt;
use std::str::FromStr;

mod admission;
mod apparmor;
mod capabilities;
mod configuration;
mod host_namespaces;
mod host_path;
mod host_ports;
mod host_probes;
mod pod;
mod privilege_escalation;
mod privileged;
mod proc_mount;
mod registry;
mod run_as_non_root;
mod run_as_user;
mod seccomp;
mod selinux;
mod sysctls;
mod templates;
mod text;
mod volume_types;
mod windows_host_process;

pub use admission::{
    AUDIT_LEVEL_LABEL, AUDIT_VERSION_LABEL, AUDIT_VIOLATIONS_ANNOTATION, ENFORCE_LEVEL_LABEL,
    ENFORCE_POLICY_ANNOTATION, ENFORCE_VERSION_LABEL, ERROR_ANNOTATION, EXEMPT_ANNOTATION,
    LabelError, NamespacePolicy, PodSecurityAdmission, WARN_LEVEL_LABEL, WARN_VERSION_LABEL,
};
pub use configuration::ConfigError;

use pod::{Form, PodView};
pub use pod::{PodJson, fields_read};

/// The newest policy minor version whose checks differ from the one before (`v1.37`).
/// Newer versions and `latest` evaluate as this one.
pub const LATEST_MINOR: u32 = 37;

/// A Pod Security Standards level, as in the `pod-security.kubernetes.io/enforce` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// No restrictions.
    Privileged,
    /// Prevents known privilege escalations.
    Baseline,
    /// Baseline plus pod hardening best practices.
    Restricted,
}

impl Level {
    /// The level as written in labels and configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = ParseError;

    /// Parses `privileged`, `baseline` or `restricted` (exactly; case matters, as upstream).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(ParseError::Level(s.to_owned())),
        }
    }
}

/// A policy version, as in the `pod-security.kubernetes.io/enforce-version` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `latest`: the newest checks this build knows.
    Latest,
    /// `v1.N`: the checks as they were in Kubernetes 1.N.
    Minor(u32),
}

impl Version {
    /// The minor whose checks run: `latest` and minors newer than [`LATEST_MINOR`] run the
    /// newest checks.
    pub fn effective_minor(self) -> u32 {
        match self {
            Version::Latest => LATEST_MINOR,
            Version::Minor(minor) => minor.min(LATEST_MINOR),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(minor) => write!(f, "v1.{minor}"),
        }
    }
}

impl FromStr for Version {
    type Err = ParseError;

    /// Parses `latest` or `v1.N`, where N has no leading zero (`v1.0`, `v1.25`; not `v1.05`,
    /// `1.25` or `v2.0`), as upstream's `ParseVersion`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let invalid = || ParseError::Version(s.to_owned());
        let digits = s.strip_prefix("v1.").ok_or_else(invalid)?;
        let well_formed = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !well_formed {
            return Err(invalid());
        }
        digits.parse().map(Version::Minor).map_err(|_| invalid())
    }
}

/// A level at a version: what a namespace enforces, audits or warns about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version of the level's checks.
    pub version: Version,
}

impl LevelVersion {
    /// A level at a version.
    pub const fn new(level: Level, version: Version) -> Self {
        LevelVersion { level, version }
    }
}

impl fmt::Display for LevelVersion {
    /// `restricted:v1.37`, `baseline:latest`: the form upstream quotes in its messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

impl FromStr for LevelVersion {
    type Err = ParseError;

    /// Parses the [`Display`](fmt::Display) form, `LEVEL:VERSION`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (level, version) = s
            .split_once(':')
            .ok_or_else(|| ParseError::LevelVersion(s.to_owned()))?;
        Ok(LevelVersion::new(level.parse()?, version.parse()?))
    }
}

/// A level or version string that is not one of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not `privileged`, `baseline` or `restricted`.
    #[error("invalid Pod Security level {0:?}: must be one of privileged, baseline, restricted")]
    Level(String),
    /// Not `latest` or `v1.N`.
    #[error("invalid Pod Security version {0:?}: must be \"latest\" or \"v1.x\"")]
    Version(String),
    /// Not `LEVEL:VERSION`.
    #[error("invalid Pod Security level and version {0:?}: must be LEVEL:VERSION")]
    LevelVersion(String),
}

/// One check that a pod fails: upstream's `ForbiddenReason` and `ForbiddenDetail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailure {
    /// The upstream check ID, e.g. `allowPrivilegeEscalation`, `capabilities_restricted`.
    pub id: &'static str,
    /// The short reason, e.g. `allowPrivilegeEscalation != false`.
    pub reason: String,
    /// What exactly is wrong, e.g. `container "app" must set
    /// securityContext.allowPrivilegeEscalation=false`; may be empty.
    pub detail: String,
}

/// Runs every check of `level_version` on a pod, in upstream's order (baseline checks by ID,
/// then restricted checks by ID; at restricted, baseline checks that a restricted check
/// replaces at that version are skipped). Returns the checks the pod fails; empty when it
/// complies or the level is privileged.
///
/// `pod_metadata` is the pod's (or pod template's) `metadata`: the seccomp annotations of
/// policies before v1.19 and the AppArmor annotations are read from it. `pod_spec` is the
/// PodSpec. Either is `None` when missing. Both are read from a decoded tree (`&Value`) or an
/// object view ([`Node`](crate::admission::Node)) alike.
pub fn check_pod<'a, J: PodJson<'a>>(
    level_version: LevelVersion,
    pod_metadata: Option<J>,
    pod_spec: Option<J>,
) -> Vec<CheckFailure> {
    J::check_pod(level_version, pod_metadata, pod_spec)
}

/// [`check_pod`] of a pod held in form `F`.
fn check_pod_in<'a, F: Form>(
    level_version: LevelVersion,
    pod_metadata: Option<F::Json<'a>>,
    pod_spec: Option<F::Json<'a>>,
) -> Vec<CheckFailure> {
    let mut failures = Vec::new();
    if level_version.level == Level::Privileged {
        return failures;
    }
    let pod = PodView::<F>::new(pod_metadata, pod_spec);
    for &(id, run) in registry::checks_for(level_version.level, level_version.version) {
        if let Some(forbidden) = F::check_of(run)(&pod) {
            failures.push(CheckFailure {
                id,
                reason: forbidden.reason.to_owned(),
                detail: forbidden.detail,
            });
        }
    }
    failures
}

/// The message upstream denies with: `violates PodSecurity "restricted:v1.37": ` followed by
/// each failure's reason, with its detail in parentheses when there is one, joined by `, `
/// (upstream does not merge failures). Audit annotations and warnings use the same text after
/// `would `.
pub fn violation_message(level_version: LevelVersion, failures: &[CheckFailure]) -> String {
    let mut message = format!("violates PodSecurity \"{level_version}\": ");
    for (index, failure) in failures.iter().enumerate() {
        if index > 0 {
            message.push_str(", ");
        }
        // Upstream's placeholder for a check that forbids without a reason.
        let reason = if failure.reason.is_empty() {
            "unknown forbidden reason"
        } else {
            &failure.reason
        };
        message.push_str(reason);
        if !failure.detail.is_empty() {
            message.push_str(" (");
            message.push_str(&failure.detail);
            message.push(')');
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::ObjectView;

    /// [`check_pod`] of a pod held as a tree and as a view, which must fail alike.
    fn checked(level_version: LevelVersion, metadata: &Value, spec: &Value) -> Vec<CheckFailure> {
        let failures = check_pod(level_version, Some(metadata), Some(spec));
        let metadata_view = ObjectView::parse(&metadata.to_string()).unwrap();
        let spec_view = ObjectView::parse(&spec.to_string()).unwrap();
        let from_view = check_pod(
            level_version,
            Some(metadata_view.root()),
            Some(spec_view.root()),
        );
        assert_eq!(failures, from_view, "{spec}");
        failures
    }

    #[test]
    fn parses_levels() {
        for (text, level) in [
            ("privileged", Level::Privileged),
            ("baseline", Level::Baseline),
            ("restricted", Level::Restricted),
        ] {
            assert_eq!(text.parse::<Level>(), Ok(level));
            assert_eq!(level.to_string(), text);
        }
        for bad in ["", "Restricted", "restricted ", "default"] {
            assert_eq!(bad.parse::<Level>(), Err(ParseError::Level(bad.to_owned())));
        }
    }

    #[test]
    fn parses_versions() {
        for (text, version) in [
            ("latest", Version::Latest),
            ("v1.0", Version::Minor(0)),
            ("v1.9", Version::Minor(9)),
            ("v1.25", Version::Minor(25)),
            ("v1.100", Version::Minor(100)),
        ] {
            assert_eq!(text.parse::<Version>(), Ok(version), "{text}");
            assert_eq!(version.to_string(), text);
        }
        for bad in [
            "",
            "Latest",
            "1.25",
            "v1",
            "v1.",
            "v1.05",
            "v1.00",
            "v2.0",
            "v1.2x",
            "v1.-1",
            "v1.+1",
            "v1.99999999999",
        ] {
            assert_eq!(
                bad.parse::<Version>(),
                Err(ParseError::Version(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn newer_versions_behave_as_latest() {
        assert_eq!(Version::Latest.effective_minor(), LATEST_MINOR);
        assert_eq!(
            Version::Minor(LATEST_MINOR + 5).effective_minor(),
            LATEST_MINOR
        );
        assert_eq!(Version::Minor(12).effective_minor(), 12);
    }

    #[test]
    fn level_version_round_trips() {
        for text in ["restricted:v1.37", "baseline:latest", "privileged:v1.0"] {
            let parsed: LevelVersion = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(
            "restricted".parse::<LevelVersion>(),
            Err(ParseError::LevelVersion("restricted".to_owned()))
        );
        assert!(matches!(
            "restricted:1.2".parse::<LevelVersion>(),
            Err(ParseError::Version(_))
        ));
    }

    fn restricted(minor: u32) -> LevelVersion {
        LevelVersion::new(Level::Restricted, Version::Minor(minor))
    }

    #[test]
    fn privileged_checks_nothing() {
        let spec = json!({"hostNetwork": true, "containers": [{"name": "a"}]});
        let level = LevelVersion::new(Level::Privileged, Version::Latest);
        assert!(checked(level, &json!({}), &spec).is_empty());
    }

    #[test]
    fn compliant_restricted_pod_passes() {
        let spec = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "app",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        });
        for minor in 0..=LATEST_MINOR + 1 {
            assert_eq!(checked(restricted(minor), &json!({}), &spec), vec![]);
        }
    }

    #[test]
    fn aggregates_like_upstream() {
        let spec = json!({
            "hostNetwork": true,
            "containers": [{"name": "app"}],
        });
        let level = restricted(37);
        let failures = checked(level, &json!({}), &spec);
        let ids: Vec<_> = failures.iter().map(|f| f.id).collect();
        assert_eq!(
            ids,
            [
                "hostNamespaces",
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "runAsNonRoot",
                "seccompProfile_restricted",
            ]
        );
        assert_eq!(
            violation_message(level, &failures),
            "violates PodSecurity \"restricted:v1.37\": host namespaces (hostNetwork=true), \
             allowPrivilegeEscalation != false (container \"app\" must set \
             securityContext.allowPrivilegeEscalation=false), unrestricted capabilities \
             (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"app\" must set \
             securityContext.runAsNonRoot=true), seccompProfile (pod or container \"app\" must \
             set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn message_keeps_the_requested_version_and_empty_details() {
        let level = LevelVersion::new(Level::Baseline, Version::Minor(99));
        let failures = [
            CheckFailure {
                id: "a",
                reason: "first".to_owned(),
                detail: String::new(),
            },
            CheckFailure {
                id: "b",
                reason: String::new(),
                detail: "why".to_owned(),
            },
        ];
        assert_eq!(
            violation_message(level, &failures),
            "violates PodSecurity \"baseline:v1.99\": first, unknown forbidden reason (why)"
        );
    }

    #[test]
    fn old_restricted_versions_run_the_baseline_checks_they_had() {
        // Before 1.22 restricted has no capabilities check of its own: baseline's runs.
        let spec = json!({"containers": [{
            "name": "a",
            "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
        }]});
        let ids = |minor| -> Vec<&str> {
            checked(restricted(minor), &json!({}), &spec)
                .into_iter()
                .map(|f| f.id)
                .collect()
        };
        assert_eq!(ids(7), ["capabilities_baseline", "runAsNonRoot"]);
        assert_eq!(
            ids(21),
            [
                "capabilities_baseline",
                "allowPrivilegeEscalation",
                "runAsNonRoot",
                "seccompProfile_restricted"
            ]
        );
        assert_eq!(
            ids(22),
            [
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "runAsNonRoot",
                "seccompProfile_restricted"
            ]
        );
    }
}
