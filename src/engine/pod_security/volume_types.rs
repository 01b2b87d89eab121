//! `restrictedVolumes` (restricted, from v1.0, replacing `hostPathVolumes`): inline volumes may
//! only be `configMap`, `csi`, `downwardAPI`, `emptyDir`, `ephemeral`, `image`,
//! `persistentVolumeClaim`, `projected` or `secret`.

use crate::admission::JsonRead;

use super::pod::{Form, PodView, field, str_field};
use super::registry::Forbidden;
use super::text::{join_quote, pluralize, sorted_unique};

const ALLOWED: [&str; 9] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The restricted sources, in the order upstream looks for them; a volume with none of these
/// (and none allowed) is reported as `unknown`.
const RESTRICTED: [&str; 21] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn is_allowed<'a, J: JsonRead<'a>>(volume: J) -> bool {
    ALLOWED.iter().any(|source| field(volume, source).is_some())
}

fn restricted_type<'a, J: JsonRead<'a>>(volume: J) -> &'static str {
    RESTRICTED
        .into_iter()
        .find(|source| field(volume, source).is_some())
        .unwrap_or("unknown")
}

pub(super) fn v1_0<F: Form>(pod: &PodView<'_, F>) -> Option<Forbidden> {
    let mut volumes: Vec<&str> = Vec::new();
    let mut types: Vec<&str> = Vec::new();
    for volume in pod.volumes().filter(|v| !is_allowed(*v)) {
        volumes.push(str_field(volume, "name"));
        types.push(restricted_type(volume));
    }
    if volumes.is_empty() {
        return None;
    }
    let types = sorted_unique(types);
    Some(Forbidden::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", volumes.len()),
            join_quote(volumes.iter().copied()),
            pluralize("uses", "use", volumes.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(types)
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
    fn allows_only_the_listed_sources() {
        let allowed: Vec<_> = ALLOWED
            .iter()
            .map(|source| json!({"name": source, source.to_string(): {}}))
            .collect();
        assert_eq!(
            run(forms!(v1_0), &json!({}), &json!({"volumes": allowed})),
            None
        );

        for source in RESTRICTED {
            let spec = json!({"volumes": [{"name": "v", source: {}}]});
            let want = format!(r#"volume "v" uses restricted volume type "{source}""#);
            assert_eq!(
                run(forms!(v1_0), &json!({}), &spec),
                Some(("restricted volume types", want))
            );
        }
    }

    #[test]
    fn reports_every_volume_and_each_type_once() {
        let spec = json!({"volumes": [
            {"name": "a", "nfs": {}},
            {"name": "b", "hostPath": {}, "emptyDir": null},
            {"name": "c", "configMap": {}, "hostPath": {}},
            {"name": "d", "hostPath": {}},
            {"name": "e"},
        ]});
        assert_eq!(
            run(forms!(v1_0), &json!({}), &spec),
            Some((
                "restricted volume types",
                r#"volumes "a", "b", "d", "e" use restricted volume types "hostPath", "nfs", "unknown""#
                    .to_owned()
            ))
        );
    }
}
