//! The apiserver's field validation of admission policies and bindings at create
//! (`pkg/apis/admissionregistration/validation` of Kubernetes v1.37), for what is not CEL:
//! names, `paramKind`, `matchConstraints`/`matchResources` (selectors, rules), validations'
//! messages and reasons, audit annotation keys, `paramRef`, `validationActions`. Each error is
//! worded as the apiserver's `field.Error` (`spec.x: Invalid value: "v": …`, `Required value`,
//! `Unsupported value`, `Duplicate value`, `Forbidden`). The errors of compiling the policy's CEL
//! join them, and all are reported in the apiserver's order (see [`FieldErrors::result`]).
//! Fields the apiserver defaults before validating (`failurePolicy`, `matchPolicy`, the
//! selectors) are not required.

use super::policy_core::{expect_instantiable, expect_output};
use super::variables::is_cel_identifier;
use crate::expressions::{CelType, Expression};
use crate::kubernetes::names;
use crate::policy::admission_policy::{
    AuditAnnotation, MatchResources, NamedRule, ParamKind, ParamRef, PolicyCommon, Validation,
    ValidationAction,
};
use crate::policy::{DocumentSource, LabelSelector, PolicyError};

/// The most audit annotations a policy may have.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// The longest audit annotation `valueExpression`, in bytes.
pub(super) const MAX_VALUE_EXPRESSION_BYTES: usize = 5 * 1024;

/// The sections of a policy's `spec` in the order the apiserver validates them, each with the
/// fields of one of its items in that order (`validations[i]`: `expression`,
/// `messageExpression`, `message`, `reason`).
pub(super) type SpecOrder = &'static [(&'static str, &'static [&'static str])];

/// `ValidateValidatingAdmissionPolicy`'s order.
pub(super) const VALIDATING_ORDER: SpecOrder = &[
    ("failurePolicy", &[]),
    ("paramKind", &[]),
    ("matchConstraints", &[]),
    ("matchConditions", &["expression", "name"]),
    ("variables", &["name", "expression"]),
    (
        "validations",
        &["expression", "messageExpression", "message", "reason"],
    ),
    ("auditAnnotations", &["key", "valueExpression"]),
];

/// `ValidateMutatingAdmissionPolicy`'s order.
pub(super) const MUTATING_ORDER: SpecOrder = &[
    ("failurePolicy", &[]),
    ("paramKind", &[]),
    ("matchConstraints", &[]),
    ("matchConditions", &["expression", "name"]),
    ("variables", &["name", "expression"]),
    // A mutation's errors are found in the apiserver's order (which depends on its patchType).
    ("mutations", &[]),
    ("reinvocationPolicy", &[]),
];

/// A binding's errors are found in the apiserver's order already.
pub(super) const BINDING_ORDER: SpecOrder = &[];

/// Where the apiserver lists an error at `field` among a policy's: `metadata` first, then by
/// section of `spec`, item index and field of the item. A duplicate audit annotation key is
/// found after the annotation's own errors (upstream checks it after validating the item).
fn apiserver_rank(field: &str, message: &str, order: SpecOrder) -> (usize, usize, usize) {
    let Some(rest) = field.strip_prefix("spec.") else {
        return (0, 0, 0);
    };
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    let (name, rest) = rest.split_at(end);
    let Some(section) = order.iter().position(|(section, _)| *section == name) else {
        return (order.len() + 1, 0, 0);
    };
    let (index, rest) = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((index, rest)) => (index.parse::<usize>().map_or(0, |i| i + 1), rest),
        None => (0, rest),
    };
    let item_fields = order[section].1;
    let item_field = rest.strip_prefix('.').unwrap_or(rest);
    let item_field = &item_field[..item_field.find(['.', '[']).unwrap_or(item_field.len())];
    let mut position = item_fields
        .iter()
        .position(|f| *f == item_field)
        .unwrap_or(0);
    if name == "auditAnnotations" && message.starts_with("Duplicate value") {
        position = item_fields.len();
    }
    (section + 1, index, position)
}

/// A policy's errors, found in the apiserver's order or placed there by [`FieldErrors::result`].
#[derive(Default)]
pub(super) struct FieldErrors(Vec<(String, String)>);

impl FieldErrors {
    /// Adds an error found while compiling (a CEL expression, its output type).
    pub(super) fn add(&mut self, error: PolicyError) {
        self.0
            .push((error.field.unwrap_or_default(), error.message));
    }

    /// The value of `result`, or `None` with its error added.
    pub(super) fn keep<T>(&mut self, result: Result<T, PolicyError>) -> Option<T> {
        result.map_err(|error| self.add(error)).ok()
    }

    /// A compiled expression of `field` whose static type is one of `expected`, or `None`
    /// with the error of compiling it or of its type added.
    pub(super) fn typed(
        &mut self,
        source: &DocumentSource,
        field: &str,
        compiled: Result<Expression, PolicyError>,
        expected: &[CelType],
    ) -> Option<Expression> {
        let expression = self.keep(compiled)?;
        self.keep(expect_output(source, field, &expression, expected))?;
        self.keep(expect_instantiable(source, field, &expression))?;
        Some(expression)
    }

    /// Every error, in the apiserver's order for a spec validated in `order`, as one load
    /// error of `source`: `field: message` for one, and kubectl's list (`\n* field: message`
    /// each) for several, as `kubectl create` prints the apiserver's answer.
    pub(super) fn result(
        self,
        source: &DocumentSource,
        order: SpecOrder,
    ) -> Result<(), PolicyError> {
        let mut errors = self.0;
        errors.sort_by_cached_key(|(field, message)| apiserver_rank(field, message, order));
        match errors.as_slice() {
            [] => Ok(()),
            [(field, message)] => Err(PolicyError::at(source, field.as_str(), message.as_str())),
            several => Err(PolicyError::at(
                source,
                "",
                several
                    .iter()
                    .map(|(field, message)| format!("\n* {field}: {message}"))
                    .collect::<String>(),
            )),
        }
    }

    pub(super) fn required(&mut self, field: impl Into<String>, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {detail}")
        };
        self.0.push((field.into(), message));
    }

    fn invalid(&mut self, field: impl Into<String>, value: &str, detail: &str) {
        self.0
            .push((field.into(), format!("Invalid value: {value:?}: {detail}")));
    }

    fn invalid_list(&mut self, field: impl Into<String>, values: &[String], detail: &str) {
        let list = serde_json::to_string(values).unwrap_or_default();
        self.0
            .push((field.into(), format!("Invalid value: {list}: {detail}")));
    }

    fn not_supported(&mut self, field: impl Into<String>, value: &str, supported: &[&str]) {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        self.0.push((
            field.into(),
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                supported.join(", ")
            ),
        ));
    }

    fn duplicate(&mut self, field: impl Into<String>, value: &str) {
        self.0
            .push((field.into(), format!("Duplicate value: {value:?}")));
    }

    fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.0.push((field.into(), format!("Forbidden: {detail}")));
    }

    /// `metadata.name`: a DNS subdomain.
    pub(super) fn object_name(&mut self, name: &str) {
        if name.is_empty() {
            self.required("metadata.name", "name or generateName is required");
        }
        for message in names::dns1123_subdomain_errors(name) {
            if !name.is_empty() {
                self.invalid("metadata.name", name, &message);
            }
        }
    }

    /// What ValidatingAdmissionPolicy and MutatingAdmissionPolicy share, in the apiserver's
    /// order: the name, `paramKind`, `matchConstraints` (required, with resource rules), the
    /// variables' names.
    pub(super) fn policy_common(&mut self, name: &str, common: &PolicyCommon<'_>) {
        self.object_name(name);
        if let Some(kind) = common.param_kind {
            self.param_kind(kind);
        }
        match common.match_constraints {
            None => self.required("spec.matchConstraints", ""),
            Some(constraints) => {
                self.match_resources("spec.matchConstraints", constraints);
                if constraints.resource_rules.is_empty() {
                    self.required("spec.matchConstraints.resourceRules", "");
                }
            }
        }
        for (i, variable) in common.variables.iter().enumerate() {
            self.variable_name(i, &variable.name);
        }
    }

    /// `spec.paramKind`.
    fn param_kind(&mut self, kind: &ParamKind) {
        let field = "spec.paramKind";
        if kind.api_version.is_empty() {
            self.required(format!("{field}.apiVersion"), "");
        } else if kind.api_version.matches('/').count() > 1 {
            self.invalid(
                format!("{field}.apiVersion"),
                &kind.api_version,
                &format!("unexpected GroupVersion string: {}", kind.api_version),
            );
        } else {
            let (group, version) = kind
                .api_version
                .split_once('/')
                .unwrap_or(("", kind.api_version.as_str()));
            let group_errors = names::dns1123_subdomain_errors(group);
            if !group.is_empty() && !group_errors.is_empty() {
                self.invalid(
                    format!("{field}.apiVersion"),
                    group,
                    &group_errors.join(","),
                );
            }
            if version.is_empty() {
                self.invalid(
                    format!("{field}.apiVersion"),
                    &kind.api_version,
                    "version must be specified",
                );
            } else {
                let errors = names::dns1035_label_errors(version);
                if !errors.is_empty() {
                    self.invalid(format!("{field}.apiVersion"), version, &errors.join(","));
                }
            }
        }
        if kind.kind.is_empty() {
            self.required(format!("{field}.kind"), "");
        } else {
            let errors = names::dns1035_label_errors(&kind.kind.to_ascii_lowercase());
            if !errors.is_empty() {
                self.invalid(
                    format!("{field}.kind"),
                    &kind.kind,
                    &format!(
                        "may have mixed case, but should otherwise match: {}",
                        errors.join(",")
                    ),
                );
            }
        }
    }

    /// A label selector (`namespaceSelector`, `objectSelector`, `paramRef.selector`).
    fn selector(&mut self, field: &str, selector: &Option<LabelSelector>) {
        let Some(selector) = selector else {
            return;
        };
        for (key, value) in &selector.match_labels {
            for message in names::qualified_name_errors(key) {
                self.invalid(format!("{field}.matchLabels"), key, &message);
            }
            for message in names::label_value_errors(value) {
                self.invalid(format!("{field}.matchLabels"), value, &message);
            }
        }
        for (i, requirement) in selector.match_expressions.iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            match requirement.operator.as_str() {
                "In" | "NotIn" if requirement.values.is_empty() => self.required(
                    format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ),
                "Exists" | "DoesNotExist" if !requirement.values.is_empty() => self.forbidden(
                    format!("{at}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => self.invalid(
                    format!("{at}.operator"),
                    other,
                    "not a valid selector operator",
                ),
            }
            for message in names::qualified_name_errors(&requirement.key) {
                self.invalid(format!("{at}.key"), &requirement.key, &message);
            }
            for (j, value) in requirement.values.iter().enumerate() {
                for message in names::label_value_errors(value) {
                    self.invalid(format!("{at}.values[{j}]"), value, &message);
                }
            }
        }
    }

    /// `matchConstraints` / `matchResources`.
    fn match_resources(&mut self, field: &str, resources: &MatchResources) {
        self.selector(
            &format!("{field}.namespaceSelector"),
            &resources.namespace_selector,
        );
        self.selector(
            &format!("{field}.objectSelector"),
            &resources.object_selector,
        );
        for (list, rules) in [
            ("resourceRules", &resources.resource_rules),
            ("excludeResourceRules", &resources.exclude_resource_rules),
        ] {
            for (i, rule) in rules.iter().enumerate() {
                self.rule(&format!("{field}.{list}[{i}]"), rule);
            }
        }
    }

    fn rule(&mut self, field: &str, rule: &NamedRule) {
        let mut seen: Vec<&str> = Vec::new();
        for (i, name) in rule.resource_names.iter().enumerate() {
            let at = format!("{field}.resourceNames[{i}]");
            for message in path_segment_name_errors(name) {
                self.invalid(at.clone(), name, message);
            }
            if seen.contains(&name.as_str()) {
                self.duplicate(at, name);
            } else {
                seen.push(name);
            }
        }
        let operations = &rule.operations;
        if operations.is_empty() {
            self.required(format!("{field}.operations"), "");
        }
        if operations.len() > 1 && operations.iter().any(|o| o == "*") {
            self.invalid_list(
                format!("{field}.operations"),
                operations,
                "if '*' is present, must not specify other operations",
            );
        }
        for (i, operation) in operations.iter().enumerate() {
            if !matches!(
                operation.as_str(),
                "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
            ) {
                self.not_supported(
                    format!("{field}.operations[{i}]"),
                    operation,
                    &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
                );
            }
        }
        for (list, values, what) in [
            ("apiGroups", &rule.api_groups, "API groups"),
            ("apiVersions", &rule.api_versions, "API versions"),
        ] {
            if values.is_empty() {
                self.required(format!("{field}.{list}"), "");
            }
            if values.len() > 1 && values.iter().any(|v| v == "*") {
                self.invalid_list(
                    format!("{field}.{list}"),
                    values,
                    &format!("if '*' is present, must not specify other {what}"),
                );
            }
        }
        for (i, version) in rule.api_versions.iter().enumerate() {
            if version.is_empty() {
                self.required(format!("{field}.apiVersions[{i}]"), "");
            }
        }
        self.resources(&format!("{field}.resources"), &rule.resources);
        if let Some(scope) = &rule.scope
            && !matches!(scope.as_str(), "*" | "Cluster" | "Namespaced")
        {
            self.not_supported(
                format!("{field}.scope"),
                scope,
                &["*", "Cluster", "Namespaced"],
            );
        }
    }

    fn resources(&mut self, field: &str, resources: &[String]) {
        if resources.is_empty() {
            self.required(field, "");
        }
        let mut wildcard_subresources: Vec<&str> = Vec::new();
        let mut wildcard_resources: Vec<&str> = Vec::new();
        let (mut double, mut single, mut plain) = (false, false, false);
        for (i, entry) in resources.iter().enumerate() {
            if entry.is_empty() {
                self.required(format!("{field}[{i}]"), "");
                continue;
            }
            double |= entry == "*/*";
            single |= entry == "*";
            let Some((resource, subresource)) = entry.split_once('/') else {
                plain = entry != "*";
                continue;
            };
            if wildcard_subresources.contains(&resource) {
                self.invalid(
                    format!("{field}[{i}]"),
                    entry,
                    &format!("if '{resource}/*' is present, must not specify {entry}"),
                );
            }
            if wildcard_resources.contains(&subresource) {
                self.invalid(
                    format!("{field}[{i}]"),
                    entry,
                    &format!("if '*/{subresource}' is present, must not specify {entry}"),
                );
            }
            if subresource == "*" {
                wildcard_subresources.push(resource);
            }
            if resource == "*" {
                wildcard_resources.push(subresource);
            }
        }
        if resources.len() > 1 && double {
            self.invalid_list(
                field,
                resources,
                "if '*/*' is present, must not specify other resources",
            );
        }
        if single && plain {
            self.invalid_list(
                field,
                resources,
                "if '*' is present, must not specify other resources without subresources",
            );
        }
    }

    /// `spec.variables[*].name`: names must be CEL identifiers (the apiserver allows duplicates).
    fn variable_name(&mut self, index: usize, name: &str) {
        let field = format!("spec.variables[{index}].name");
        if name.trim().is_empty() {
            self.required(field, "name is not specified");
        } else if !is_cel_identifier(name) {
            self.invalid(field, name, "must be a valid CEL identifier");
        }
    }

    /// One `spec.validations` entry, beyond its CEL.
    pub(super) fn validation(&mut self, index: usize, validation: &Validation) {
        let field = format!("spec.validations[{index}]");
        if validation.expression.trim().is_empty() {
            self.required(format!("{field}.expression"), "expression is not specified");
        }
        if let Some(text) = &validation.message_expression
            && !text.is_empty()
            && text.trim().is_empty()
        {
            self.invalid(
                format!("{field}.messageExpression"),
                text,
                "must be non-empty if specified",
            );
        }
        if let Some(message) = &validation.message {
            if !message.is_empty() && message.trim().is_empty() {
                self.invalid(
                    format!("{field}.message"),
                    message,
                    "must be non-empty if specified",
                );
            } else if message.trim().contains(['\n', '\r']) {
                self.invalid(
                    format!("{field}.message"),
                    message,
                    "must not contain line breaks",
                );
            }
        }
        if let Some(reason) = &validation.reason
            && !matches!(
                reason.as_str(),
                "Forbidden" | "Invalid" | "RequestEntityTooLarge"
            )
        {
            self.not_supported(
                format!("{field}.reason"),
                reason,
                &["Forbidden", "Invalid", "RequestEntityTooLarge"],
            );
        }
    }

    /// `spec.auditAnnotations`, beyond their CEL.
    pub(super) fn audit_annotations(&mut self, policy: &str, annotations: &[AuditAnnotation]) {
        if annotations.len() > MAX_AUDIT_ANNOTATIONS {
            self.0.push((
                "spec.auditAnnotations".to_owned(),
                format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
            ));
        }
        let mut keys: Vec<&str> = Vec::new();
        for (i, annotation) in annotations.iter().enumerate() {
            let field = format!("spec.auditAnnotations[{i}]");
            let qualified = format!("{policy}/{}", annotation.key);
            for message in names::qualified_name_errors(&qualified) {
                self.invalid(format!("{field}.key"), &qualified, &message);
            }
            let value = annotation.value_expression.trim();
            if value.is_empty() {
                self.required(
                    format!("{field}.valueExpression"),
                    "valueExpression is not specified",
                );
            } else if value.len() > MAX_VALUE_EXPRESSION_BYTES {
                self.required(
                    format!("{field}.valueExpression"),
                    &format!("must not exceed {MAX_VALUE_EXPRESSION_BYTES} bytes in length"),
                );
            }
            if keys.contains(&annotation.key.as_str()) {
                self.duplicate(format!("{field}.key"), &annotation.key);
            }
            keys.push(&annotation.key);
        }
    }

    /// What both kinds of binding have, in the apiserver's order: the name,
    /// `spec.policyName`, `spec.paramRef`, `spec.matchResources`.
    pub(super) fn binding(
        &mut self,
        name: &str,
        policy_name: &str,
        param_ref: &Option<ParamRef>,
        match_resources: &Option<MatchResources>,
    ) {
        self.object_name(name);
        self.policy_name(policy_name);
        self.param_ref(param_ref);
        if let Some(resources) = match_resources {
            self.match_resources("spec.matchResources", resources);
        }
    }

    fn policy_name(&mut self, name: &str) {
        if name.is_empty() {
            self.required("spec.policyName", "");
        }
        for message in names::dns1123_subdomain_errors(name) {
            if !name.is_empty() {
                self.invalid("spec.policyName", name, &message);
            }
        }
    }

    /// A binding's `spec.paramRef`.
    fn param_ref(&mut self, param_ref: &Option<ParamRef>) {
        let Some(param_ref) = param_ref else {
            return;
        };
        let field = "spec.paramRef";
        let name = param_ref.name.as_deref().unwrap_or("");
        if !name.is_empty() {
            for message in path_segment_name_errors(name) {
                self.invalid(format!("{field}.name"), name, message);
            }
            if param_ref.selector.is_some() {
                self.forbidden(
                    format!("{field}.name"),
                    "name and selector are mutually exclusive",
                );
            }
        }
        if param_ref.selector.is_some() {
            self.selector(&format!("{field}.selector"), &param_ref.selector);
            if !name.is_empty() {
                self.forbidden(
                    format!("{field}.selector"),
                    "name and selector are mutually exclusive",
                );
            }
        }
        if name.is_empty() && param_ref.selector.is_none() {
            self.required(field, "one of name or selector must be specified");
        }
        if param_ref.parameter_not_found_action.is_none() {
            self.required(format!("{field}.parameterNotFoundAction"), "");
        }
    }

    /// A ValidatingAdmissionPolicyBinding's `spec.validationActions`.
    pub(super) fn validation_actions(&mut self, actions: &[ValidationAction]) {
        let field = "spec.validationActions";
        for (i, action) in actions.iter().enumerate() {
            if actions[..i].contains(action) {
                self.duplicate(format!("{field}[{i}]"), action.as_str());
            }
        }
        if actions.contains(&ValidationAction::Deny) && actions.contains(&ValidationAction::Warn) {
            let list: Vec<String> = actions.iter().map(|a| a.as_str().to_owned()).collect();
            self.invalid_list(
                field,
                &list,
                "must not contain both Deny and Warn (repeating the same validation failure \
                 information in the API response and headers serves no purpose)",
            );
        }
        if actions.is_empty() {
            self.required(field, "at least one validation action is required");
        }
    }
}

/// `IsPathSegmentName`: what may name an object in a URL path.
fn path_segment_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name == "." || name == ".." {
        errors.push(if name == "." {
            "may not be '.'"
        } else {
            "may not be '..'"
        });
    }
    if name.contains('/') {
        errors.push("may not contain '/'");
    }
    if name.contains('%') {
        errors.push("may not contain '%'");
    }
    errors
}
