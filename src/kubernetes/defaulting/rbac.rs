//! `rbac.authorization.k8s.io/v1`: RoleBindings and ClusterRoleBindings.

use super::fields::{Object, child, default_text, items, text};

/// `roleRef.apiGroup` and the `apiGroup` of User and Group subjects default to
/// `rbac.authorization.k8s.io` (a ServiceAccount subject's stays empty).
pub(super) fn binding(object: &mut Object) {
    const GROUP: &str = "rbac.authorization.k8s.io";
    if let Some(role_ref) = child(object, "roleRef") {
        default_text(role_ref, "apiGroup", GROUP);
    }
    for subject in items(object, "subjects") {
        if matches!(text(subject, "kind"), Some("User" | "Group")) {
            default_text(subject, "apiGroup", GROUP);
        }
    }
}
