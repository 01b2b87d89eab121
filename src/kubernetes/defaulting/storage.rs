//! `storage.k8s.io/v1`: StorageClasses and CSIDrivers (VolumeAttachments' inline volume specs
//! are not defaulted here).

use serde_json::json;

use super::fields::{Object, child_or_empty, default_value, is_empty};

pub(super) fn storage_class(object: &mut Object) {
    default_value(object, "reclaimPolicy", || json!("Delete"));
    default_value(object, "volumeBindingMode", || json!("Immediate"));
}

/// SELinuxMountReadWriteOncePod (GA) and VolumeLimitScaling (beta, on) are enabled in 1.37.
pub(super) fn csi_driver(object: &mut Object) {
    let Some(spec) = child_or_empty(object, "spec") else {
        return;
    };
    default_value(spec, "attachRequired", || json!(true));
    default_value(spec, "podInfoOnMount", || json!(false));
    default_value(spec, "storageCapacity", || json!(false));
    default_value(spec, "fsGroupPolicy", || json!("ReadWriteOnceWithFSType"));
    if is_empty(spec, "volumeLifecycleModes") {
        spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
    }
    default_value(spec, "requiresRepublish", || json!(false));
    default_value(spec, "seLinuxMount", || json!(false));
    default_value(spec, "preventPodSchedulingIfMissing", || json!(false));
}
