//! `hostNamespaces` (baseline, from v1.0): pods must not share the host's network, PID or IPC
//! namespace.

use super::pod::{Form, PodView, bool_field};
use super::registry::Forbidden;

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let spec = pod.spec()?;
    let shared = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(key, _)| bool_field(spec, key) == Some(true))
    .map(|(_, text)| text);
    let detail: Vec<&str> = shared.collect();
    if detail.is_empty() {
        return None;
    }
    Some(Forbidden::new("host namespaces", detail.join(", ")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn forbids_each_host_namespace() {
        let cases = [
            (json!({}), None),
            (json!({"hostNetwork": false, "hostPID": null}), None),
            (json!({"hostNetwork": true}), Some("hostNetwork=true")),
            (
                json!({"hostIPC": true, "hostPID": true, "hostNetwork": true}),
                Some("hostNetwork=true, hostPID=true, hostIPC=true"),
            ),
            (json!({"hostIPC": true}), Some("hostIPC=true")),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("host namespaces", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
        }
    }
}
