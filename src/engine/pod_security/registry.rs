//! Which checks run at which level and version, in which order.
//!
//! Upstream registers each check with its revisions (the first policy minor each applies to)
//! and, for restricted checks, the baseline checks a revision replaces. It runs baseline checks
//! sorted by ID, then restricted checks sorted by ID; [`CHECKS`] is kept in that order (a test
//! holds it there), so resolving a level and version needs no sorting or allocation.

use std::sync::LazyLock;

use super::pod::{Flat, PodView, Tree};
use super::{
    LATEST_MINOR, Level, Version, apparmor, capabilities, host_namespaces, host_path, host_ports,
    host_probes, privilege_escalation, privileged, proc_mount, run_as_non_root, run_as_user,
    seccomp, selinux, sysctls, volume_types, windows_host_process,
};

/// Why a check forbids a pod: upstream's reason and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Forbidden {
    pub reason: &'static str,
    pub detail: String,
}

impl Forbidden {
    pub fn new(reason: &'static str, detail: String) -> Self {
        Forbidden { reason, detail }
    }
}

/// One revision of a check, compiled for pods held in form `F`: `None` when the pod passes.
pub(super) type CheckFn<F> = fn(&PodView<'_, F>) -> Option<Forbidden>;

/// One revision of a check, compiled for each form a pod is held in.
#[derive(Clone, Copy)]
pub(super) struct Run {
    pub tree: CheckFn<Tree>,
    pub flat: CheckFn<Flat>,
}

/// The [`Run`] of a check revision written generically over the form.
macro_rules! forms {
    ($($segment:ident)::+) => {
        $crate::engine::pod_security::registry::Run {
            tree: $($segment)::+::<$crate::engine::pod_security::pod::Tree>,
            flat: $($segment)::+::<$crate::engine::pod_security::pod::Flat>,
        }
    };
}
#[cfg(test)]
pub(super) use forms;

/// A revision of a check and the policy minor it starts at.
pub(super) struct Revision {
    pub since_minor: u32,
    pub run: Run,
    /// Baseline check IDs this (restricted) revision replaces.
    pub overrides: &'static [&'static str],
}

/// A check with its revisions, oldest first.
pub(super) struct Check {
    pub id: &'static str,
    pub level: Level,
    pub revisions: &'static [Revision],
}

impl Check {
    /// The revision in force at `minor`, if the check existed then.
    fn revision_at(&self, minor: u32) -> Option<&'static Revision> {
        self.revisions
            .iter()
            .rev()
            .find(|revision| revision.since_minor <= minor)
    }
}

const fn rev(since_minor: u32, run: Run) -> Revision {
    Revision {
        since_minor,
        run,
        overrides: &[],
    }
}

const fn rev_replacing(since_minor: u32, run: Run, overrides: &'static [&'static str]) -> Revision {
    Revision {
        since_minor,
        run,
        overrides,
    }
}

/// Every check: baseline checks sorted by ID (byte order, as Go sorts), then restricted ones.
pub(super) static CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(apparmor::v1_0))],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(capabilities::baseline_v1_0))],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(host_namespaces::v1_0))],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(host_path::v1_0))],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(host_ports::v1_0))],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        revisions: &[rev(34, forms!(host_probes::v1_34))],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(privileged::v1_0))],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        revisions: &[
            rev(0, forms!(proc_mount::v1_0)),
            rev(35, forms!(proc_mount::baseline_v1_35)),
        ],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        revisions: &[
            rev(0, forms!(selinux::v1_0)),
            rev(31, forms!(selinux::v1_31)),
        ],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        revisions: &[
            rev(0, forms!(seccomp::baseline_v1_0)),
            rev(19, forms!(seccomp::baseline_v1_19)),
        ],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        revisions: &[
            rev(0, forms!(sysctls::v1_0)),
            rev(27, forms!(sysctls::v1_27)),
            rev(29, forms!(sysctls::v1_29)),
            rev(32, forms!(sysctls::v1_32)),
            rev(37, forms!(sysctls::v1_37)),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        revisions: &[rev(0, forms!(windows_host_process::v1_0))],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        revisions: &[
            rev(8, forms!(privilege_escalation::v1_8)),
            rev(25, forms!(privilege_escalation::v1_25)),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        revisions: &[
            rev_replacing(
                22,
                forms!(capabilities::restricted_v1_22),
                &["capabilities_baseline"],
            ),
            rev_replacing(
                25,
                forms!(capabilities::restricted_v1_25),
                &["capabilities_baseline"],
            ),
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        revisions: &[rev_replacing(35, forms!(proc_mount::v1_0), &["procMount"])],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        revisions: &[rev_replacing(
            0,
            forms!(volume_types::v1_0),
            &["hostPathVolumes"],
        )],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        revisions: &[
            rev(0, forms!(run_as_non_root::v1_0)),
            rev(35, forms!(run_as_non_root::v1_35)),
        ],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        revisions: &[
            rev(23, forms!(run_as_user::v1_23)),
            rev(35, forms!(run_as_user::v1_35)),
        ],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        revisions: &[
            rev_replacing(
                19,
                forms!(seccomp::restricted_v1_19),
                &["seccompProfile_baseline"],
            ),
            rev_replacing(
                25,
                forms!(seccomp::restricted_v1_25),
                &["seccompProfile_baseline"],
            ),
        ],
    },
];

/// Whether a restricted check in force at `minor` replaces the baseline check `id`.
fn replaced_at(id: &str, minor: u32) -> bool {
    CHECKS
        .iter()
        .filter(|check| check.level == Level::Restricted)
        .filter_map(|check| check.revision_at(minor))
        .any(|revision| revision.overrides.contains(&id))
}

/// The checks of baseline and restricted at every minor up to [`LATEST_MINOR`] (index
/// `minor * 2`, `+ 1` for restricted).
static RESOLVED: LazyLock<Vec<Vec<(&'static str, &'static Run)>>> = LazyLock::new(|| {
    (0..=LATEST_MINOR)
        .flat_map(|minor| [Level::Baseline, Level::Restricted].map(|level| resolve(level, minor)))
        .collect()
});

/// Resolves the checks of every level and version (done once; later calls return at once).
pub(super) fn resolve_all() {
    LazyLock::force(&RESOLVED);
}

/// The checks to run for a level and version, in upstream's order, with their IDs. Nothing
/// for [`Level::Privileged`].
pub(super) fn checks_for(
    level: Level,
    version: Version,
) -> &'static [(&'static str, &'static Run)] {
    let row = match level {
        Level::Privileged => return &[],
        Level::Baseline => 0,
        Level::Restricted => 1,
    };
    &RESOLVED[version.effective_minor() as usize * 2 + row]
}

/// The checks of `level` at policy minor `minor`: restricted runs the baseline checks its own
/// revisions in force do not replace, then its own.
fn resolve(level: Level, minor: u32) -> Vec<(&'static str, &'static Run)> {
    CHECKS
        .iter()
        .filter(|check| match level {
            Level::Privileged => false,
            Level::Baseline => check.level == Level::Baseline,
            Level::Restricted => check.level == Level::Restricted || !replaced_at(check.id, minor),
        })
        .filter_map(|check| {
            check
                .revision_at(minor)
                .map(|revision| (check.id, &revision.run))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::LATEST_MINOR;
    use super::*;

    fn ids(level: Level, minor: u32) -> Vec<&'static str> {
        checks_for(level, Version::Minor(minor))
            .iter()
            .map(|(id, _)| *id)
            .collect()
    }

    #[test]
    fn table_is_in_upstream_order() {
        let baseline: Vec<_> = CHECKS
            .iter()
            .filter(|c| c.level == Level::Baseline)
            .map(|c| c.id)
            .collect();
        let restricted: Vec<_> = CHECKS
            .iter()
            .filter(|c| c.level == Level::Restricted)
            .map(|c| c.id)
            .collect();
        assert!(baseline.is_sorted(), "{baseline:?}");
        assert!(restricted.is_sorted(), "{restricted:?}");
        assert_eq!(
            CHECKS.iter().map(|c| c.id).collect::<Vec<_>>(),
            [baseline, restricted].concat()
        );
    }

    #[test]
    fn revisions_increase_and_overrides_name_baseline_checks() {
        for check in CHECKS {
            assert!(!check.revisions.is_empty(), "{}", check.id);
            assert!(
                check
                    .revisions
                    .windows(2)
                    .all(|w| w[0].since_minor < w[1].since_minor),
                "{}",
                check.id
            );
            for revision in check.revisions {
                if !revision.overrides.is_empty() {
                    assert_eq!(check.level, Level::Restricted, "{}", check.id);
                }
                for id in revision.overrides {
                    let target = CHECKS.iter().find(|c| c.id == *id).unwrap();
                    assert_eq!(target.level, Level::Baseline, "{id}");
                }
            }
        }
    }

    #[test]
    fn latest_minor_is_the_newest_revision() {
        let newest = CHECKS
            .iter()
            .flat_map(|c| c.revisions)
            .map(|r| r.since_minor)
            .max();
        assert_eq!(newest, Some(LATEST_MINOR));
    }

    #[test]
    fn resolves_levels_and_versions() {
        assert!(ids(Level::Privileged, 37).is_empty());
        assert_eq!(
            ids(Level::Baseline, 0),
            [
                "appArmorProfile",
                "capabilities_baseline",
                "hostNamespaces",
                "hostPathVolumes",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "seccompProfile_baseline",
                "sysctls",
                "windowsHostProcess",
            ]
        );
        assert_eq!(
            ids(Level::Restricted, 0),
            [
                "appArmorProfile",
                "capabilities_baseline",
                "hostNamespaces",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "seccompProfile_baseline",
                "sysctls",
                "windowsHostProcess",
                "restrictedVolumes",
                "runAsNonRoot",
            ]
        );
        assert_eq!(
            ids(Level::Restricted, 37),
            [
                "appArmorProfile",
                "hostNamespaces",
                "hostPorts",
                "hostProbesAndHostLifecycle",
                "privileged",
                "seLinuxOptions",
                "sysctls",
                "windowsHostProcess",
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "procMount_restricted",
                "restrictedVolumes",
                "runAsNonRoot",
                "runAsUser",
                "seccompProfile_restricted",
            ]
        );
        assert_eq!(
            checks_for(Level::Restricted, Version::Latest)
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>(),
            ids(Level::Restricted, 37)
        );
    }
}
