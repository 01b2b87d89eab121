//! Gatekeeper's expansion (`pkg/expansion`): a request whose kind an ExpansionTemplate applies
//! to (a Deployment) also has the object it generates (its `spec.template` as a Pod) reviewed
//! by the constraints, as Gatekeeper's webhook, audit and `gator` review it: kind
//! `generatedGVK`, name `<parent name>-<kind>` in lower case, the parent's namespace, an owner
//! reference to the parent, source `Generated`; each result's message is prefixed
//! `[Implied by <template>]` and its enforcement action is the template's when it has one.
//! Resultants are expanded again (children before their parent's other resultants), at most
//! 30 levels deep.

use serde_json::{Map, Value, json};

use super::Action;
use crate::admission::{
    AdmissionRequest, GroupVersionKind, GroupVersionResource, Operation, RequestObject,
};
use crate::policy::gatekeeper::GatekeeperDocument;
use crate::policy::gatekeeper_expansion::{ApplyTo, ExpansionTemplate};
use crate::policy::{DocumentSource, PolicyError};

/// Gatekeeper's bound on nested expansion (`maxRecursionDepth`).
const MAX_DEPTH: usize = 30;

/// An ExpansionTemplate, compiled.
#[derive(Debug, Clone)]
pub(super) struct CompiledExpansion {
    /// `metadata.name`.
    pub(super) name: String,
    apply_to: Vec<ApplyTo>,
    /// `spec.templateSource`, split at dots.
    source_path: Vec<String>,
    generated: GroupVersionKind,
    /// `spec.enforcementAction`, when it overrides the constraints'.
    pub(super) action: Option<Action>,
}

impl CompiledExpansion {
    fn applies_to(&self, gvk: &GroupVersionKind) -> bool {
        self.apply_to
            .iter()
            .any(|entry| entry.matches(&gvk.group, &gvk.version, &gvk.kind))
    }

    /// `expandResource`: the object `parent` (of kind `gvk`, in `parent_namespace`) generates.
    fn resultant(
        &self,
        parent: &Value,
        gvk: &GroupVersionKind,
        namespace: &ExpansionNamespace,
        parent_namespace: Option<&str>,
    ) -> Result<Value, String> {
        let parent_name = parent
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut at = parent;
        for segment in &self.source_path {
            at = match at.get(segment.as_str()) {
                Some(next) => next,
                None => {
                    return Err(format!(
                        "could not find source field {:?} in resource {parent_name}",
                        self.source_path.join(".")
                    ));
                }
            };
        }
        let Value::Object(source) = at else {
            return Err(format!(
                "could not extract source field from unstructured: .{} is not an object",
                self.source_path.join(".")
            ));
        };
        let mut resultant = source.clone();
        let generated = &self.generated;
        let api_version = if generated.group.is_empty() {
            generated.version.clone()
        } else {
            format!("{}/{}", generated.group, generated.version)
        };
        resultant.insert("apiVersion".into(), Value::String(api_version));
        resultant.insert("kind".into(), Value::String(generated.kind.clone()));
        let metadata = resultant
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !metadata.is_object() {
            *metadata = Value::Object(Map::new());
        }
        let Value::Object(metadata) = metadata else {
            unreachable!("metadata was just made an object");
        };
        // `unstructured.SetNamespace`: an empty namespace removes the field; with neither a
        // Namespace nor a parent's namespace, the source's own is kept.
        let namespace = match namespace {
            ExpansionNamespace::Of(name) => Some(name.as_str()),
            ExpansionNamespace::Parent => parent_namespace,
        };
        match namespace {
            Some("") => {
                metadata.remove("namespace");
            }
            Some(namespace) => {
                metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
            }
            None => {}
        }
        let mut name = parent_name.to_owned();
        if !generated.kind.is_empty() {
            name.push('-');
        }
        name.push_str(&generated.kind);
        metadata.insert("name".into(), Value::String(name.to_lowercase()));
        let parent_api_version = if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        if !parent_api_version.is_empty() && !gvk.kind.is_empty() && !parent_name.is_empty() {
            ensure_owner_reference(metadata, &parent_api_version, &gvk.kind, parent_name);
        }
        Ok(Value::Object(resultant))
    }
}

/// `ensureOwnerReference`: the parent appended to the owner references unless one names it
/// already; the list is then rewritten as `SetOwnerReferences` writes it (each entry's
/// `apiVersion`, `kind`, `name`, `uid`, and `controller` and `blockOwnerDeletion` when set; an
/// entry that is not an object makes the list empty first, as `GetOwnerReferences` reads it).
fn ensure_owner_reference(
    metadata: &mut Map<String, Value>,
    api_version: &str,
    kind: &str,
    name: &str,
) {
    let text = |reference: &Value, field: &str| {
        reference
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let existing: Vec<Value> = match metadata.get("ownerReferences") {
        Some(Value::Array(references)) if references.iter().all(Value::is_object) => {
            references.clone()
        }
        _ => Vec::new(),
    };
    if existing.iter().any(|reference| {
        text(reference, "apiVersion") == api_version
            && text(reference, "kind") == kind
            && text(reference, "name") == name
    }) {
        return;
    }
    let mut references: Vec<Value> = existing
        .iter()
        .map(|reference| {
            let mut entry = Map::new();
            for field in ["apiVersion", "kind", "name", "uid"] {
                entry.insert(field.into(), Value::String(text(reference, field)));
            }
            for field in ["controller", "blockOwnerDeletion"] {
                if let Some(Value::Bool(flag)) = reference.get(field) {
                    entry.insert(field.into(), Value::Bool(*flag));
                }
            }
            Value::Object(entry)
        })
        .collect();
    references.push(json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": ""}));
    metadata.insert("ownerReferences".into(), Value::Array(references));
}

/// The Namespace Gatekeeper gives the expansion: its name becomes each resultant's namespace
/// (an empty one removes it); without one, a resultant takes its parent's `metadata.namespace`
/// when it has one and keeps its source's otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ExpansionNamespace {
    /// The webhook's (the request's namespace, read), audit's (the object's), gator's (the
    /// object's, or an empty Namespace for an object without one).
    Of(String),
    /// None: a request or an audited object without a namespace.
    Parent,
}

/// An object a request's object generates, as the request Gatekeeper reviews for it.
#[derive(Debug)]
pub(super) struct Resultant<'e> {
    /// The template that generated it.
    pub(super) template: &'e CompiledExpansion,
    /// The operation its review carries: the webhook's request's; none offline.
    pub(super) operation: Option<Operation>,
    /// The request: the generated kind and object, the parent's namespace and operation.
    pub(super) request: AdmissionRequest,
}

impl Resultant<'_> {
    /// The generated object.
    pub(super) fn object(&self) -> &Value {
        match (&self.request.object, &self.request.old_object) {
            (Some(object), _) | (None, Some(object)) => object,
            (None, None) => &Value::Null,
        }
    }
}

/// The ExpansionTemplates of a policy set, by name.
#[derive(Debug, Clone, Default)]
pub(super) struct Expansions {
    templates: Vec<CompiledExpansion>,
}

impl Expansions {
    /// Compiles the ExpansionTemplates among `documents`. Two of one name, and templates that
    /// expand each other's generated kinds in a cycle (which Gatekeeper marks as conflicting
    /// and never runs), are refused.
    pub(super) fn compile(
        documents: &[(&DocumentSource, &GatekeeperDocument)],
    ) -> Result<Self, PolicyError> {
        let mut templates: Vec<(&DocumentSource, CompiledExpansion)> = Vec::new();
        for (source, document) in documents {
            let GatekeeperDocument::Expansion(template) = document else {
                continue;
            };
            let compiled = compile_one(template);
            if templates.iter().any(|(_, t)| t.name == compiled.name) {
                return Err(PolicyError::at(
                    source,
                    "metadata.name",
                    format!("another ExpansionTemplate is named {:?}", compiled.name),
                ));
            }
            templates.push((source, compiled));
        }
        templates.sort_by(|(_, a), (_, b)| a.name.cmp(&b.name));
        for (index, (source, _)) in templates.iter().enumerate() {
            if let Some(cycle) = cycle_from(index, &templates) {
                return Err(PolicyError::at(
                    source,
                    "spec.applyTo",
                    format!(
                        "ExpansionTemplates {} expand each other's generated kinds in a cycle \
                         (Gatekeeper marks them as conflicting and runs none of them)",
                        cycle.join(" -> ")
                    ),
                ));
            }
        }
        Ok(Expansions {
            templates: templates.into_iter().map(|(_, t)| t).collect(),
        })
    }

    /// Whether there are none.
    pub(super) fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// Whether some template expands objects of this kind.
    pub(super) fn apply_to(&self, gvk: &GroupVersionKind) -> bool {
        self.templates.iter().any(|t| t.applies_to(gvk))
    }

    /// The kinds the templates expand, as `(group, version, kind)`.
    pub(super) fn expanded_kinds(&self) -> Vec<(String, String, String)> {
        let mut kinds = Vec::new();
        for template in &self.templates {
            for entry in &template.apply_to {
                for group in &entry.groups {
                    for version in &entry.versions {
                        for kind in &entry.kinds {
                            kinds.push((group.clone(), version.clone(), kind.clone()));
                        }
                    }
                }
            }
        }
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// The resultants of `object` (the object of `request`, or its old object on DELETE), in
    /// `namespace`, or why it cannot be expanded (Gatekeeper then fails the review).
    /// `parent_namespace` is the object's namespace as the expansion reads it (the webhook
    /// clears it first); `operation`, the one the resultants' reviews carry (the webhook's).
    pub(super) fn expand<'e>(
        &'e self,
        request: &AdmissionRequest,
        object: &Value,
        namespace: &ExpansionNamespace,
        parent_namespace: Option<&str>,
        operation: Option<Operation>,
    ) -> Result<Vec<Resultant<'e>>, String> {
        let gvk = &request.kind;
        if gvk.group.is_empty() && gvk.version.is_empty() && gvk.kind.is_empty() {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(format!("cannot expand resource {name} with empty GVK"));
        }
        let mut resultants = Vec::new();
        let parent = Parent {
            gvk,
            object,
            namespace: parent_namespace,
        };
        self.expand_into(&parent, namespace, operation, 0, &mut resultants)?;
        Ok(resultants)
    }

    fn expand_into<'e>(
        &'e self,
        parent: &Parent<'_>,
        namespace: &ExpansionNamespace,
        operation: Option<Operation>,
        depth: usize,
        resultants: &mut Vec<Resultant<'e>>,
    ) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(format!("maximum recursion depth of {MAX_DEPTH} reached"));
        }
        let mut level = Vec::new();
        for template in self.templates.iter().filter(|t| t.applies_to(parent.gvk)) {
            let object =
                template.resultant(parent.object, parent.gvk, namespace, parent.namespace)?;
            level.push(Resultant {
                template,
                operation,
                request: resultant_request(&template.generated, object, operation),
            });
        }
        for resultant in &level {
            let object = resultant.object();
            let child = Parent {
                gvk: &resultant.template.generated,
                object,
                namespace: object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str),
            };
            self.expand_into(&child, namespace, operation, depth + 1, resultants)?;
        }
        resultants.extend(level);
        Ok(())
    }
}

/// An object being expanded.
struct Parent<'p> {
    gvk: &'p GroupVersionKind,
    object: &'p Value,
    namespace: Option<&'p str>,
}

fn compile_one(template: &ExpansionTemplate) -> CompiledExpansion {
    let spec = &template.spec;
    let generated = &spec.generated_gvk;
    CompiledExpansion {
        name: template.metadata.name.clone(),
        apply_to: spec.apply_to.clone(),
        source_path: spec.template_source.split('.').map(str::to_owned).collect(),
        generated: GroupVersionKind {
            group: generated.group.clone(),
            version: generated.version.clone(),
            kind: generated.kind.clone(),
        },
        action: Action::parse(&spec.enforcement_action),
    }
}

/// The names along a cycle of templates from `start` back to it (`a` generates what `b`
/// expands, …), if there is one.
fn cycle_from(
    start: usize,
    templates: &[(&DocumentSource, CompiledExpansion)],
) -> Option<Vec<String>> {
    let next = |from: usize| {
        templates
            .iter()
            .enumerate()
            .filter(move |(_, (_, to))| to.applies_to(&templates[from].1.generated))
            .map(|(index, _)| index)
    };
    let mut stack = vec![(start, vec![start])];
    let mut seen = vec![false; templates.len()];
    while let Some((at, path)) = stack.pop() {
        for to in next(at) {
            if to == start {
                let mut names: Vec<String> =
                    path.iter().map(|&i| templates[i].1.name.clone()).collect();
                names.push(templates[start].1.name.clone());
                return Some(names);
            }
            if !seen[to] {
                seen[to] = true;
                let mut longer = path.clone();
                longer.push(to);
                stack.push((to, longer));
            }
        }
    }
    None
}

/// The request Gatekeeper reviews for a resultant (`createReviewForResultant`, then
/// `augmentedUnstructuredToAdmissionRequest`): the generated kind, the object's name and
/// namespace, the webhook's operation (offline none, here CREATE) and nothing else; on DELETE
/// the object is the old object.
fn resultant_request(
    gvk: &GroupVersionKind,
    object: Value,
    operation: Option<Operation>,
) -> AdmissionRequest {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    let (name, namespace) = (text("/metadata/name"), text("/metadata/namespace"));
    let operation = operation.unwrap_or(Operation::Create);
    let (object, old_object) = if operation == Operation::Delete {
        (None, Some(object))
    } else {
        (Some(object), None)
    };
    AdmissionRequest {
        uid: String::new(),
        kind: gvk.clone(),
        resource: GroupVersionResource::default(),
        sub_resource: None,
        request_kind: None,
        request_resource: None,
        request_sub_resource: None,
        name,
        namespace,
        operation,
        user_info: Default::default(),
        object: object.map(RequestObject::from),
        old_object: old_object.map(RequestObject::from),
        dry_run: None,
        options: None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::policy::gatekeeper_expansion::recognise;

    fn source() -> DocumentSource {
        DocumentSource {
            file: PathBuf::from("expansion.yaml"),
            index: 0,
        }
    }

    fn template(
        name: &str,
        apply_to: (&str, &str),
        generated: (&str, &str),
        action: &str,
    ) -> GatekeeperDocument {
        let (group, kind) = apply_to;
        let value = json!({
            "apiVersion": "expansion.gatekeeper.sh/v1beta1",
            "kind": "ExpansionTemplate",
            "metadata": {"name": name},
            "spec": {
                "applyTo": [{"groups": [group], "kinds": [kind], "versions": ["v1"]}],
                "templateSource": "spec.template",
                "generatedGVK": {"group": generated.0, "version": "v1", "kind": generated.1},
                "enforcementAction": action,
            },
        });
        GatekeeperDocument::Expansion(Box::new(recognise(&source(), value).unwrap()))
    }

    fn compile(documents: &[GatekeeperDocument]) -> Result<Expansions, PolicyError> {
        let source = source();
        let pairs: Vec<_> = documents.iter().map(|d| (&source, d)).collect();
        Expansions::compile(&pairs)
    }

    /// Deployments expanded into their Pods, with no enforcement action of their own.
    fn deployments_to_pods() -> Expansions {
        compile(&[template(
            "expand-deployments",
            ("apps", "Deployment"),
            ("", "Pod"),
            "",
        )])
        .unwrap()
    }

    fn deployment_request(operation: &str) -> AdmissionRequest {
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "Web", "namespace": "shop"},
            "spec": {"template": {
                "metadata": {"labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "v1", "kind": "Thing", "name": "t"}]},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }},
        });
        let (object_field, old_field) = if operation == "DELETE" {
            ("oldObject", "object")
        } else {
            ("object", "oldObject")
        };
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": "shop",
            "name": "Web",
            "operation": operation,
            "userInfo": {"username": "alice"},
            object_field: object,
            old_field: null,
        }))
        .unwrap()
    }

    #[test]
    fn a_deployment_generates_its_pod_as_gatekeeper_makes_it() {
        let expansions = compile(&[template(
            "expand-deployments",
            ("apps", "Deployment"),
            ("", "Pod"),
            "warn",
        )])
        .unwrap();
        let request = deployment_request("CREATE");
        let shop = ExpansionNamespace::Of("shop".into());
        let op = Some(Operation::Create);
        let resultants = expansions
            .expand(
                &request,
                request.object.as_deref().unwrap(),
                &shop,
                None,
                op,
            )
            .unwrap();
        assert_eq!(resultants.len(), 1);
        let resultant = &resultants[0];
        assert_eq!(resultant.template.name, "expand-deployments");
        assert_eq!(resultant.template.action, Some(Action::Warn));
        assert_eq!(
            resultant.request.object.as_deref(),
            Some(&json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web-pod", "namespace": "shop", "labels": {"app": "web"},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": ""},
                        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "Web", "uid": ""},
                    ],
                },
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            }))
        );
        assert_eq!(resultant.request.kind.kind, "Pod");
        assert_eq!(resultant.request.name.as_deref(), Some("web-pod"));
        assert_eq!(resultant.request.namespace.as_deref(), Some("shop"));
        assert_eq!(resultant.request.operation, Operation::Create);

        let delete = deployment_request("DELETE");
        let op = Some(Operation::Delete);
        let resultants = expansions
            .expand(
                &delete,
                delete.old_object.as_ref().unwrap(),
                &shop,
                None,
                op,
            )
            .unwrap();
        assert!(resultants[0].request.object.is_none());
        assert_eq!(resultants[0].request.operation, Operation::Delete);
        assert_eq!(resultants[0].request.user_info, Default::default());
        assert_eq!(resultants[0].object()["kind"], "Pod");
        assert!(!expansions.apply_to(&resultants[0].request.kind));
    }

    #[test]
    fn resultants_expand_again_children_first() {
        let expansions = compile(&[
            template("a-cronjobs", ("batch", "CronJob"), ("batch", "Job"), ""),
            template("b-jobs", ("batch", "Job"), ("", "Pod"), ""),
        ])
        .unwrap();
        let object = json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "spec": {"template": {"spec": {"template": {"spec": {"containers": []}}}}},
        });
        let mut request = deployment_request("CREATE");
        request.kind = GroupVersionKind {
            group: "batch".into(),
            version: "v1".into(),
            kind: "CronJob".into(),
        };
        request.namespace = None;
        let resultants = expansions
            .expand(
                &request,
                &object,
                &ExpansionNamespace::Of(String::new()),
                None,
                None,
            )
            .unwrap();
        let names: Vec<_> = resultants
            .iter()
            .map(|r| (r.template.name.as_str(), r.request.name.clone().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("b-jobs", "nightly-job-pod".to_owned()),
                ("a-cronjobs", "nightly-job".to_owned())
            ]
        );
        assert!(resultants[0].request.namespace.is_none());
        assert_eq!(resultants[0].request.operation, Operation::Create);
        assert_eq!(resultants[0].operation, None);
    }

    #[test]
    fn without_a_namespace_the_parents_or_the_sources_is_kept() {
        let expansions = deployments_to_pods();
        let request = deployment_request("CREATE");
        let object = json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"metadata": {"namespace": "own"}}},
        });
        let namespace_of = |parent: Option<&str>, namespace: ExpansionNamespace| {
            let resultants = expansions
                .expand(&request, &object, &namespace, parent, None)
                .unwrap();
            resultants[0].request.namespace.clone()
        };
        assert_eq!(
            namespace_of(None, ExpansionNamespace::Parent).as_deref(),
            Some("own")
        );
        assert_eq!(
            namespace_of(Some("shop"), ExpansionNamespace::Parent).as_deref(),
            Some("shop")
        );
        assert_eq!(
            namespace_of(Some("shop"), ExpansionNamespace::Of("x".into())).as_deref(),
            Some("x")
        );
        assert_eq!(
            namespace_of(Some("shop"), ExpansionNamespace::Of(String::new())),
            None
        );
    }

    #[test]
    fn a_missing_source_is_an_error_and_cycles_are_refused() {
        let expansions = deployments_to_pods();
        let request = deployment_request("CREATE");
        let error = expansions
            .expand(
                &request,
                &json!({"metadata": {"name": "bare"}}),
                &ExpansionNamespace::Parent,
                None,
                None,
            )
            .unwrap_err();
        assert_eq!(
            error,
            "could not find source field \"spec.template\" in resource bare"
        );
        let error = compile(&[
            template("one", ("apps", "Deployment"), ("batch", "Job"), ""),
            template("two", ("batch", "Job"), ("apps", "Deployment"), ""),
        ])
        .unwrap_err();
        assert!(error.message.contains("one -> two -> one"), "{error}");
        let error = compile(&[
            template("same", ("apps", "Deployment"), ("", "Pod"), ""),
            template("same", ("batch", "Job"), ("", "Pod"), ""),
        ])
        .unwrap_err();
        assert_eq!(error.field.as_deref(), Some("metadata.name"));
    }
}
