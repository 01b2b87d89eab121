//! `hostPathVolumes` (baseline, from v1.0): no `hostPath` volumes. At restricted,
//! `restrictedVolumes` replaces it.

use super::pod::{Form, PodView, field, str_field};
use super::registry::Forbidden;
use super::text::{join_quote, pluralize};

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let volumes: Vec<&str> = pod
        .volumes()
        .filter(|volume| field(*volume, "hostPath").is_some())
        .map(|volume| str_field(volume, "name"))
        .collect();
    if volumes.is_empty() {
        return None;
    }
    Some(Forbidden::new(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", volumes.len()),
            join_quote(volumes.iter().copied())
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::pod::run;
    use super::super::registry::forms;
    use super::*;

    #[test]
    fn forbids_host_path_volumes() {
        let cases = [
            (json!({}), None),
            (
                json!({"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": null}]}),
                None,
            ),
            (
                json!({"volumes": [{"name": "a", "hostPath": {"path": "/"}}]}),
                Some(r#"volume "a""#),
            ),
            (
                json!({"volumes": [
                    {"name": "a", "hostPath": {}},
                    {"name": "b", "secret": {}},
                    {"name": "c", "hostPath": {"path": "/var"}},
                ]}),
                Some(r#"volumes "a", "c""#),
            ),
        ];
        for (spec, detail) in cases {
            let want = detail.map(|d| ("hostPath volumes", d.to_owned()));
            assert_eq!(run(forms!(v1_0), &json!({}), &spec), want, "{spec}");
        }
    }
}
