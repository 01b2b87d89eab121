//! Type checking of ValidatingAdmissionPolicy expressions against the schemas of the kinds a
//! policy matches, as the kube-controller-manager writes it into the policy's
//! `status.typeChecking`: a warning per validation `expression` and `messageExpression` that
//! does not type-check for some matched kind, never a refusal.
//!
//! As upstream: the kinds come from `matchConstraints.resourceRules` without wildcards (a rule
//! with a `*` group or version is skipped, `*` and subresources are dropped), at most ten;
//! `object` and `oldObject` have the kind's schema type, `params` the schema of `paramKind`
//! (`dyn` when unknown), `request` and `namespaceObject` the apiserver's types, and
//! `variables.<name>` the type of each variable's expression (objects as `dyn`).

use std::sync::Arc;

use serde::Serialize;

use super::variables::CEL_RESERVED;
use crate::admission::GroupVersionKind;
use crate::expressions::{
    CelEnvironment, CelType, DeclaredObject, ObjectFields, admission_request_type,
    namespace_object_type,
};
use crate::kubernetes::schema::{NodeKind, Schema};
use crate::policy::admission_policy::{Document, ValidatingPolicySpec};

/// At most this many kinds are checked per policy (upstream's `maxTypesToCheck`).
const MAX_TYPES_TO_CHECK: usize = 10;

/// A type-checking warning about one expression of a policy, as the apiserver's
/// `status.typeChecking.expressionWarnings` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionWarning {
    /// The expression's field path (`spec.validations[0].expression`).
    pub field_ref: String,
    /// What is wrong, per kind (`apps/v1, Kind=Deployment: ERROR: <input>:1:12: …`).
    pub warning: String,
}

/// Schemas the checker can resolve: built-in kinds and the custom resources of the policies.
pub(super) struct SchemaIndex<'a> {
    /// Each custom resource's plural and schema.
    pub custom: &'a [(String, Schema)],
}

impl SchemaIndex<'_> {
    fn schema(&self, kind: &GroupVersionKind) -> Option<Schema> {
        crate::kubernetes::schema::builtin(kind).or_else(|| {
            self.custom
                .iter()
                .find(|(_, s)| s.gvk() == kind)
                .map(|(_, s)| s.clone())
        })
    }

    /// The kinds served as `resource` in `group`/`version`, as the apiserver's RESTMapper
    /// finds them: an empty group matches every group.
    fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<GroupVersionKind> {
        let custom: Vec<GroupVersionKind> = self
            .custom
            .iter()
            .filter(|(plural, s)| {
                plural == resource
                    && (group.is_empty() || s.gvk().group == group)
                    && s.gvk().version == version
            })
            .map(|(_, s)| s.gvk().clone())
            .collect();
        let builtin = crate::kubernetes::schema::builtin_kinds()
            .into_iter()
            .filter(|gvk| {
                (group.is_empty() || gvk.group == group)
                    && gvk.version == version
                    && crate::kubernetes::names::resource_for_kind(&gvk.kind) == resource
            });
        builtin.chain(custom).collect()
    }
}

/// The warnings for one ValidatingAdmissionPolicy (empty when everything type-checks or
/// nothing can be checked).
pub(super) fn check_policy(
    document: &Document<ValidatingPolicySpec>,
    schemas: &SchemaIndex<'_>,
) -> Vec<ExpressionWarning> {
    let spec = &document.spec;
    let kinds = kinds_to_check(spec, schemas);
    if kinds.is_empty() {
        return Vec::new();
    }
    let params = spec.param_kind.as_ref().map(|kind| {
        let (group, version) = match kind.api_version.split_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), kind.api_version.clone()),
        };
        let gvk = GroupVersionKind {
            group,
            version,
            kind: kind.kind.clone(),
        };
        schemas
            .schema(&gvk)
            .map_or(CelType::Dyn, |schema| schema_object(&schema))
    });
    let environment = CelEnvironment::kubernetes();
    let environments: Vec<(GroupVersionKind, Vec<(&str, CelType)>)> = kinds
        .into_iter()
        .map(|(gvk, schema)| {
            let object = schema_object(&schema);
            let mut declared: Vec<(&str, CelType)> = vec![
                ("object", object.clone()),
                ("oldObject", object),
                ("request", admission_request_type()),
                ("namespaceObject", namespace_object_type()),
                (
                    "authorizer",
                    CelType::Opaque("kubernetes.authorization.Authorizer"),
                ),
            ];
            if let Some(params) = &params {
                declared.push(("params", params.clone()));
            }
            let mut variables: Vec<(String, CelType)> = Vec::new();
            for variable in &spec.variables {
                let mut with_variables = declared.clone();
                with_variables.push((
                    "variables",
                    DeclaredObject::object_type("kubernetes.variables", variables.clone()),
                ));
                let output = environment
                    .type_check(&variable.expression, &with_variables, &[])
                    .map_or(CelType::Dyn, |t| t.as_variable());
                variables.push((variable.name.clone(), output));
            }
            declared.push((
                "variables",
                DeclaredObject::object_type("kubernetes.variables", variables),
            ));
            (gvk, declared)
        })
        .collect();
    let check = |expression: &str| -> Option<String> {
        let results: Vec<String> = environments
            .iter()
            .filter_map(|(gvk, declared)| {
                environment
                    .type_check(expression, declared, &[])
                    .err()
                    .map(|issues| format!("{}: {issues}\n", gvk_string(gvk)))
            })
            .collect();
        (!results.is_empty()).then(|| results.join("\n"))
    };
    let mut warnings = Vec::new();
    for (index, validation) in spec.validations.iter().enumerate() {
        if let Some(warning) = check(&validation.expression) {
            warnings.push(ExpressionWarning {
                field_ref: format!("spec.validations[{index}].expression"),
                warning,
            });
        }
        if let Some(message_expression) = validation
            .message_expression
            .as_deref()
            .filter(|m| !m.is_empty())
            && let Some(warning) = check(message_expression)
        {
            warnings.push(ExpressionWarning {
                field_ref: format!("spec.validations[{index}].messageExpression"),
                warning,
            });
        }
    }
    warnings
}

/// `apps/v1, Kind=Deployment` (`/v1, Kind=Pod` for the core group), as Go prints a GVK.
fn gvk_string(gvk: &GroupVersionKind) -> String {
    format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
}

/// The kinds the policy's resource rules name without wildcards, sorted by group, version and
/// kind, with their schemas; kinds without a schema are skipped.
fn kinds_to_check(
    spec: &ValidatingPolicySpec,
    schemas: &SchemaIndex<'_>,
) -> Vec<(GroupVersionKind, Schema)> {
    let Some(constraints) = &spec.match_constraints else {
        return Vec::new();
    };
    let mut kinds: Vec<GroupVersionKind> = Vec::new();
    let mut count = 0;
    'rules: for rule in &constraints.resource_rules {
        if rule.api_groups.iter().any(|g| g.contains('*'))
            || rule.api_versions.iter().any(|v| v.contains('*'))
        {
            continue;
        }
        let mut groups = rule.api_groups.clone();
        let mut versions = rule.api_versions.clone();
        let mut resources: Vec<String> = rule
            .resources
            .iter()
            .filter(|r| !r.contains(['*', '/']))
            .cloned()
            .collect();
        groups.sort();
        versions.sort();
        resources.sort();
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    for kind in schemas.kinds_for(group, version, resource) {
                        if !kinds.contains(&kind) {
                            kinds.push(kind);
                        }
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            break 'rules;
                        }
                    }
                }
            }
        }
    }
    kinds.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    kinds
        .into_iter()
        .filter_map(|gvk| schemas.schema(&gvk).map(|schema| (gvk, schema)))
        .collect()
}

// ---- Schema types ----

/// An object type of a schema's arena, with the object types on the way to it (a type met
/// again on its own path is an empty object, as upstream cuts recursive references) and its
/// name: upstream names a kind's type after the kind and a per-run number, written `#` here
/// (`Pod#`), and nested types after their path (`Pod#.spec.containers.@idx`).
struct SchemaObject {
    schema: Schema,
    index: usize,
    path: Arc<[usize]>,
    name: String,
}

fn schema_object(schema: &Schema) -> CelType {
    let NodeKind::Object(index) = schema.root_node().kind else {
        return CelType::Dyn;
    };
    CelType::Object(Arc::new(SchemaObject {
        schema: schema.clone(),
        index,
        path: Arc::from([]),
        name: format!("{}#", schema.gvk().kind),
    }))
}

impl ObjectFields for SchemaObject {
    fn field(&self, name: &str) -> Option<CelType> {
        let object = self.schema.object(self.index);
        let field = object
            .fields
            .iter()
            .find(|f| escape_field_name(&f.name).as_deref() == Some(name))
            // A reserved word names its field unescaped too (`metadata.namespace`), as
            // upstream recognises keywords as field names.
            .or_else(|| {
                CEL_RESERVED
                    .contains(&name)
                    .then(|| object.fields.iter().find(|f| f.name == name))
                    .flatten()
            })?;
        let escaped = escape_field_name(&field.name).unwrap_or_default();
        self.node_type(&field.node, format!("{}.{escaped}", self.name))
    }

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
}

/// An object type with no fields.
struct EmptyObject(String);

impl ObjectFields for EmptyObject {
    fn field(&self, _: &str) -> Option<CelType> {
        None
    }

    fn name(&self) -> Option<&str> {
        Some(&self.0)
    }
}

impl SchemaObject {
    /// The CEL type of a schema node named `name`, or `None` where upstream does not expose
    /// the field (quantities and other untyped schemas).
    fn node_type(&self, node: &crate::kubernetes::schema::Node, name: String) -> Option<CelType> {
        Some(match &node.kind {
            NodeKind::String => match node.format.as_str() {
                "byte" => CelType::Bytes,
                "duration" => CelType::Duration,
                "date" | "date-time" => CelType::Timestamp,
                _ => CelType::String,
            },
            NodeKind::Integer(_) => CelType::Int,
            NodeKind::Number => CelType::Double,
            NodeKind::Boolean => CelType::Bool,
            NodeKind::Bytes => CelType::Bytes,
            NodeKind::IntOrString => CelType::Dyn,
            NodeKind::Time => CelType::Timestamp,
            NodeKind::Quantity => return None,
            NodeKind::Any => match node.go_type.as_str() {
                "runtime.RawExtension" | "v1.FieldsV1" => {
                    CelType::Object(Arc::new(EmptyObject(name)))
                }
                _ => return None,
            },
            NodeKind::Object(index) => {
                if *index == self.index || self.path.contains(index) {
                    CelType::Object(Arc::new(EmptyObject(name)))
                } else {
                    let mut path = self.path.to_vec();
                    path.push(self.index);
                    CelType::Object(Arc::new(SchemaObject {
                        schema: self.schema.clone(),
                        index: *index,
                        path: path.into(),
                        name,
                    }))
                }
            }
            NodeKind::Map { values, .. } => CelType::Map(
                Box::new(CelType::String),
                Box::new(self.node_type(values, format!("{name}.@elem"))?),
            ),
            NodeKind::List { items, .. } => {
                CelType::List(Box::new(self.node_type(items, format!("{name}.@idx"))?))
            }
        })
    }
}

/// A property name as CEL expressions reach it (upstream's `Escape`), or `None` when it cannot
/// be reached.
fn escape_field_name(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if CEL_RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    let mut escaped = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            escaped.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c => escaped.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(escaped)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::engine::Engine;

    fn warnings(yaml: &str) -> Vec<(String, String)> {
        let documents = crate::policy::documents_from_str(Path::new("t.yaml"), yaml).unwrap();
        let engine = Engine::compile(&documents).unwrap();
        engine
            .type_checking()
            .into_values()
            .flatten()
            .map(|w| (w.field_ref, w.warning))
            .collect()
    }

    fn policy(resources: &str, expressions: &[&str]) -> String {
        let validations: String = expressions
            .iter()
            .map(|e| format!("  - expression: {e:?}\n"))
            .collect();
        format!(
            "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: p
spec:
  matchConstraints:
    resourceRules:
{resources}
  validations:
{validations}"
        )
    }

    const DEPLOYMENTS: &str = "    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]";

    #[test]
    fn misspelled_fields_are_reported_per_kind() {
        let found = warnings(&policy(
            DEPLOYMENTS,
            &[
                "object.spec.replicas > 1",
                "object.spec.replicaz > 1",
                "object.spec.template.spec.containers.all(c, c.imagez != '')",
            ],
        ));
        assert_eq!(
            found,
            vec![
                (
                    "spec.validations[1].expression".to_owned(),
                    "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz > 1\n | ...........^\n".to_owned()
                ),
                (
                    "spec.validations[2].expression".to_owned(),
                    "apps/v1, Kind=Deployment: ERROR: <input>:1:46: undefined field 'imagez'\n | object.spec.template.spec.containers.all(c, c.imagez != '')\n | .............................................^\n".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn wildcards_and_subresources_are_not_checked() {
        let rules = "    - apiGroups: ['*']
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
    - apiGroups: ['']
      apiVersions: [v1]
      operations: [CREATE]
      resources: ['pods/status', '*']";
        assert!(warnings(&policy(rules, &["object.spec.nope == 1"])).is_empty());
    }
}
