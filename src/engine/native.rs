//! A compiled native `Policy`: its matcher, validation rules and defaulting rules.

use std::sync::Arc;

use super::PolicyOutcome;
use super::cel_input::{CelInputCell, CelObject};
use super::matching::{MatchedView, Matcher};
use super::rules::cel::{self, CelCheck, CelDefaultRule};
use super::rules::{
    CompiledDefault, CompiledPatterns, ContainerResourceRule, FamilyValidation, Finding, HostRule,
    ImageRule, ProbeRule, RequiredMetadataRule, View, attribute, parse_field_path,
};
use super::{
    Action, Decision, Endpoint, EvalError, NamespaceLookup, ReadFailure, ResourceRule, Violation,
};
use crate::admission::{AdmissionRequest, JsonRead, JsonRef, Operation, RequestObject};
use crate::patch::ObjectEditor;
use crate::policy::{DocumentSource, Policy, PolicyError};

enum NativeValidation {
    Family(FamilyValidation),
    Cel(Box<CelCheck>),
}

struct NamedValidation {
    name: String,
    message: Option<String>,
    rule: NativeValidation,
}

enum NativeDefault {
    Family(CompiledDefault),
    Cel(CelDefaultRule),
}

/// A native policy, compiled.
pub struct CompiledPolicy {
    name: Arc<str>,
    action: Action,
    matcher: Matcher,
    validations: Vec<NamedValidation>,
    defaults: Vec<NativeDefault>,
    /// Whether a rule's expression names `oldObject` or the matcher has an object selector
    /// (which matches an UPDATE on the old labels too).
    reads_old_object: bool,
}

impl CompiledPolicy {
    /// Compiles a validated policy document: regexes (through the policy set's `patterns`),
    /// quantities and paths are parsed here.
    pub fn compile(
        policy: &Policy,
        source: &DocumentSource,
        patterns: &mut CompiledPatterns,
    ) -> Result<Self, PolicyError> {
        let spec = &policy.spec;
        let mut reads_old_object = spec.match_.object_selector.is_some();
        let mut validations = Vec::new();
        for (i, rule) in spec.validate.iter().enumerate() {
            let field = |sub: &str, detail: String| {
                PolicyError::at(source, format!("spec.validate[{i}].{sub}"), detail)
            };
            let compiled = if let Some(check) = &rule.cel {
                let expression = cel::compile(&check.expression, false).map_err(|e| {
                    field(
                        "cel.expression",
                        format!(
                            "compilation failed for expression {:?}: {e}",
                            check.expression
                        ),
                    )
                })?;
                let message_expression = check
                    .message_expression
                    .as_deref()
                    .map(|text| {
                        cel::compile(text, false).map_err(|e| {
                            field(
                                "cel.messageExpression",
                                format!("compilation failed for expression {text:?}: {e}"),
                            )
                        })
                    })
                    .transpose()?;
                reads_old_object |= [Some(&expression), message_expression.as_ref()]
                    .into_iter()
                    .flatten()
                    .any(|expression| expression.uses("oldObject"));
                validations.push(NamedValidation {
                    name: rule.name.clone(),
                    message: rule.message.clone(),
                    rule: NativeValidation::Cel(Box::new(CelCheck::new(
                        expression,
                        message_expression,
                    ))),
                });
                continue;
            } else if let Some(labels) = &rule.required_labels {
                FamilyValidation::Metadata(
                    RequiredMetadataRule::new("labels", labels, patterns)
                        .map_err(|(key, e)| field(&format!("requiredLabels.{key}"), e))?,
                )
            } else if let Some(annotations) = &rule.required_annotations {
                FamilyValidation::Metadata(
                    RequiredMetadataRule::new("annotations", annotations, patterns)
                        .map_err(|(key, e)| field(&format!("requiredAnnotations.{key}"), e))?,
                )
            } else if let Some(images) = &rule.images {
                FamilyValidation::Images(ImageRule::new(images))
            } else if let Some(resources) = &rule.resources {
                FamilyValidation::Resources(
                    ContainerResourceRule::new(resources)
                        .map_err(|(key, e)| field(&format!("resources.{key}"), e))?,
                )
            } else if let Some(probes) = &rule.probes {
                FamilyValidation::Probes(ProbeRule::new(&probes.require))
            } else if let Some(host) = &rule.host {
                FamilyValidation::Host(HostRule::new(host))
            } else {
                return Err(field("", "no rule family".into()));
            };
            validations.push(NamedValidation {
                name: rule.name.clone(),
                message: rule.message.clone(),
                rule: NativeValidation::Family(compiled),
            });
        }
        let mut defaults = Vec::new();
        for (i, rule) in spec.defaults.iter().enumerate() {
            let compiled = if let Some(set) = &rule.set {
                CompiledDefault::Set {
                    path: parse_field_path(&set.path).map_err(|e| {
                        PolicyError::at(source, format!("spec.defaults[{i}].set.path"), e)
                    })?,
                    value: set.value.clone(),
                }
            } else if let Some(labels) = &rule.labels {
                CompiledDefault::Metadata {
                    field: "labels",
                    entries: labels.clone(),
                }
            } else if let Some(annotations) = &rule.annotations {
                CompiledDefault::Metadata {
                    field: "annotations",
                    entries: annotations.clone(),
                }
            } else if let Some(default) = &rule.cel {
                let expression = cel::compile(&default.expression, true).map_err(|e| {
                    PolicyError::at(
                        source,
                        format!("spec.defaults[{i}].cel.expression"),
                        format!(
                            "compilation failed for expression {:?}: {e}",
                            default.expression
                        ),
                    )
                })?;
                reads_old_object |= expression.uses("oldObject");
                defaults.push(NativeDefault::Cel(CelDefaultRule::new(expression)));
                continue;
            } else {
                return Err(PolicyError::at(
                    source,
                    format!("spec.defaults[{i}]"),
                    "no defaulting rule",
                ));
            };
            defaults.push(NativeDefault::Family(compiled));
        }
        Ok(CompiledPolicy {
            name: Arc::from(policy.metadata.name.as_str()),
            action: spec.action,
            matcher: Matcher::new(&spec.match_, spec.pod_templates),
            validations,
            defaults,
            reads_old_object,
        })
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Rules this policy holds.
    pub fn rule_count(&self) -> usize {
        self.validations.len() + self.defaults.len()
    }

    /// Whether the policy has rules for `endpoint` that may apply to `request`, from its
    /// envelope and the labels of its namespace (see [`Matcher::may_match`]).
    pub fn wants(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        let has_rules = match endpoint {
            Endpoint::Validate => !self.validations.is_empty(),
            Endpoint::Mutate => !self.defaults.is_empty(),
        };
        has_rules && self.matcher.may_match(request, namespaces)
    }

    /// Whether the policy may read `request`'s `oldObject` at `endpoint` (see
    /// [`crate::engine::Engine::wanted_objects`]).
    pub fn reads_old_object(
        &self,
        request: &AdmissionRequest,
        endpoint: Endpoint,
        namespaces: &dyn NamespaceLookup,
    ) -> bool {
        self.reads_old_object && self.wants(request, endpoint, namespaces)
    }

    /// Runs every validation rule when the policy matches; violations go where the policy's
    /// action says. `cel` is the request's CEL input, shared with the other policies.
    pub fn validate<'r>(
        &self,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        cel: &CelInputCell<'r>,
        decision: &mut Decision,
    ) -> Result<(), EvalError> {
        if self.validations.is_empty() {
            return Ok(());
        }
        let reads_namespace_object = self
            .validations
            .iter()
            .any(|rule| matches!(rule.rule, NativeValidation::Cel(_)));
        let Some(matched) = self.matches(request, namespaces, reads_namespace_object)? else {
            return Ok(());
        };
        let Some(subject) = request.subject_object() else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        // Read from the object's view where it is held in one.
        let violations = match subject.json() {
            JsonRef::Tree(object) => self.violations(request, subject, object, matched, cel),
            JsonRef::View(object) => self.violations(request, subject, object, matched, cel),
        };
        let Some(violations) = violations else {
            return Ok(());
        };
        decision.outcomes.push(PolicyOutcome {
            kind: "Policy",
            policy: self.name.clone(),
            binding: None,
            action: self.action.as_str(),
            result: if violations.is_empty() {
                "pass"
            } else {
                "fail"
            },
        });
        decision.record(self.action, violations.into_iter());
        decision
            .timings
            .push((self.name.clone(), started.elapsed()));
        Ok(())
    }

    /// The violations of the validation rules on `object` (the request's `subject`, read
    /// from its tree or its view); `None` when the match's view has no such place.
    fn violations<'r, 'a, J: JsonRead<'a>>(
        &self,
        request: &'r AdmissionRequest,
        subject: &'r RequestObject,
        object: J,
        matched: MatchedView,
        cel: &CelInputCell<'r>,
    ) -> Option<Vec<Violation>> {
        let view = View::new(request, object, matched)?;
        let mut findings: Vec<Finding> = Vec::new();
        let mut violations = Vec::new();
        for rule in &self.validations {
            match &rule.rule {
                NativeValidation::Family(family) => family.check(&view, &mut findings),
                NativeValidation::Cel(check) => {
                    let input = cel.get(request);
                    let object = CelObject::Request(subject);
                    if let Some(message) = check.check(input, object, rule.message.as_deref()) {
                        findings.push((String::new(), message));
                    }
                    // The message is already final.
                    attribute(
                        &self.name,
                        &rule.name,
                        None,
                        findings.drain(..),
                        &mut violations,
                    );
                    continue;
                }
            }
            attribute(
                &self.name,
                &rule.name,
                rule.message.as_deref(),
                findings.drain(..),
                &mut violations,
            );
        }
        Some(violations)
    }

    /// How the policy applies to `request` (`None`: it does not), or, when it would apply but
    /// the request's namespace, which its `namespaceSelector` (or, with
    /// `reads_namespace_object`, its CEL rules' `namespaceObject`) needs, could not be read,
    /// the evaluation error that the server answers with `--on-error`.
    fn matches(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        reads_namespace_object: bool,
    ) -> Result<Option<MatchedView>, EvalError> {
        let namespace = request.namespace.as_deref().unwrap_or("");
        let unreadable = |failure: ReadFailure| EvalError::NamespaceUnreadable {
            namespace: namespace.to_owned(),
            message: failure.message,
        };
        let matched = self
            .matcher
            .matches_unless_unreadable(request, namespaces)
            .map_err(unreadable)?;
        if matched.is_some()
            && reads_namespace_object
            && !namespace.is_empty()
            && let Some(failure) = namespaces.read_failure(namespace)
        {
            return Err(unreadable(failure));
        }
        Ok(matched)
    }

    /// Applies the defaulting rules, in order, when the policy matches.
    pub fn apply_defaults<'r>(
        &self,
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        cel: &CelInputCell<'r>,
        editor: &mut ObjectEditor<'_>,
    ) -> Result<(), EvalError> {
        if self.defaults.is_empty() {
            return Ok(());
        }
        let reads_namespace_object = self
            .defaults
            .iter()
            .any(|rule| matches!(rule, NativeDefault::Cel(_)));
        let Some(matched) = self.matches(request, namespaces, reads_namespace_object)? else {
            return Ok(());
        };
        let base = match matched {
            MatchedView::Object => Vec::new(),
            MatchedView::PodTemplate(location) => location.path[..location.path.len() - 1].to_vec(),
        };
        // A Pod's spec is immutable once created: a default written there on UPDATE would make
        // the apiserver refuse the update, so only metadata defaults apply then.
        let pod_update = request.operation == Operation::Update
            && matched == MatchedView::Object
            && request.kind.group.is_empty()
            && request.kind.kind == "Pod";
        for rule in &self.defaults {
            match rule {
                NativeDefault::Family(rule) => {
                    if pod_update && rule.writes_spec() {
                        continue;
                    }
                    rule.apply(&base, editor);
                }
                NativeDefault::Cel(rule) => {
                    let input = cel.get(request);
                    if let Err(error) = rule.apply(input, editor, pod_update) {
                        // Defaults never deny; a failing one is skipped and logged.
                        tracing::warn!(policy = %self.name, %error, "CEL default failed");
                    }
                }
            }
        }
        Ok(())
    }

    /// What a webhook must register for `endpoint`.
    pub fn resource_rules(&self, endpoint: Endpoint) -> Vec<ResourceRule> {
        let has_rules = match endpoint {
            Endpoint::Validate => !self.validations.is_empty(),
            Endpoint::Mutate => !self.defaults.is_empty(),
        };
        if has_rules {
            self.matcher.resource_rules()
        } else {
            Vec::new()
        }
    }
}
