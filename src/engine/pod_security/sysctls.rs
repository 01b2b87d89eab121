//! `sysctls` (baseline, from v1.0): `spec.securityContext.sysctls` may only name sysctls that
//! are namespaced and isolated from other pods; the safe set grew in v1.27, v1.29, v1.32 and
//! v1.37.

use super::pod::{Form, PodView, list, str_field};
use super::registry::Forbidden;

const SAFE_V1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const ADDED_V1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const ADDED_V1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const ADDED_V1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
const ADDED_V1_37: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
];

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, &[SAFE_V1_0])
}

pub(super) fn v1_27<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, &[SAFE_V1_0, ADDED_V1_27])
}

pub(super) fn v1_29<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, &[SAFE_V1_0, ADDED_V1_27, ADDED_V1_29])
}

pub(super) fn v1_32<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(pod, &[SAFE_V1_0, ADDED_V1_27, ADDED_V1_29, ADDED_V1_32])
}

pub(super) fn v1_37<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    check(
        pod,
        &[
            SAFE_V1_0,
            ADDED_V1_27,
            ADDED_V1_29,
            ADDED_V1_32,
            ADDED_V1_37,
        ],
    )
}

fn check<F: Form>(pod: &PodView<'_, F>, safe: &[&[&str]]) -> Option<Forbidden> {
    let context = pod.security_context()?;
    // Listed in the pod's order, repeats included, as upstream does.
    let forbidden: Vec<&str> = list(context, "sysctls")
        .map(|sysctl| str_field(sysctl, "name"))
        .filter(|name| !safe.iter().any(|set| set.contains(name)))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    Some(Forbidden::new("forbidden sysctls", forbidden.join(", ")))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::pod::run;
    use super::super::registry::{Run, forms};
    use super::*;

    fn pod(names: &[&str]) -> Value {
        let sysctls: Vec<_> = names
            .iter()
            .map(|n| json!({"name": n, "value": "1"}))
            .collect();
        json!({"securityContext": {"sysctls": sysctls}})
    }

    #[test]
    fn lists_forbidden_sysctls_in_order() {
        assert_eq!(run(forms!(v1_0), &json!({}), &json!({})), None);
        assert_eq!(
            run(forms!(v1_0), &json!({}), &pod(&["kernel.shm_rmid_forced"])),
            None
        );
        assert_eq!(
            run(
                forms!(v1_0),
                &json!({}),
                &pod(&["net.b", "kernel.shm_rmid_forced", "net.a", "net.b"])
            ),
            Some(("forbidden sysctls", "net.b, net.a, net.b".to_owned()))
        );
    }

    #[test]
    fn safe_set_grows_by_version() {
        let revisions: [(u32, Run); 5] = [
            (0, forms!(v1_0)),
            (27, forms!(v1_27)),
            (29, forms!(v1_29)),
            (32, forms!(v1_32)),
            (37, forms!(v1_37)),
        ];
        for (since, added) in [
            (27, ADDED_V1_27),
            (29, ADDED_V1_29),
            (32, ADDED_V1_32),
            (37, ADDED_V1_37),
        ] {
            for name in added {
                for (revision, check) in revisions {
                    let result = run(check, &json!({}), &pod(&[name]));
                    assert_eq!(
                        result.is_none(),
                        revision >= since,
                        "{name} at v1.{revision}"
                    );
                }
            }
        }
    }
}
