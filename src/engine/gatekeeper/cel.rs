//! A template's `K8sNativeValidation` (CEL) code, evaluated as Gatekeeper's k8scel driver
//! evaluates it (`pkg/drivers/k8scel`): the apiserver's ValidatingAdmissionPolicy validator
//! with the constraint as `params`, Gatekeeper's variables `anyObject` and `params` (the
//! constraint's `spec.parameters`) before the template's own, its `matchCondition`s, and a
//! cost budget of one per-call limit. Every false validation is a violation worded as the
//! validator words it; an evaluation error is one under failurePolicy `Fail` (the default),
//! nothing under `Ignore`. Validations and messages see neither `params` nor `authorizer`.
//!
//! Gatekeeper compiles the code when a review first needs it and reports a compile error as
//! a violation of every review; Portcullis compiles it at load and refuses the template,
//! except a `messageExpression`, which (as in Gatekeeper) then falls back to `message`.

use serde_json::{Map, Value as Json};

use super::{EnforcementPoint, ReviewedObject};
use crate::admission::{AdmissionRequest, Operation};
use crate::engine::NamespaceLookup;
use crate::engine::admission_policy::policy_core::{compile_expression, expect_output};
use crate::engine::admission_policy::scope::Scope;
use crate::engine::admission_policy::validating::{
    PolicyValidation, ValidationRun, run_validations,
};
use crate::engine::admission_policy::variables::Variables;
use crate::engine::cel_input::CelObject;
use crate::expressions::{
    Activation, CelType, Declarations, Expression, PER_CALL_COST_LIMIT, Variables as Declared,
};
use crate::policy::gatekeeper::CelSource;
use crate::policy::{DocumentSource, PolicyError};

/// The prefix no name of the template's may have (Gatekeeper's `ReservedPrefix`).
const RESERVED_PREFIX: &str = "gatekeeper_internal_";

/// Gatekeeper's variables, declared before the template's (`transform.AllVariablesCEL`):
/// `anyObject` is the object, or the old object on DELETE; `params` the constraint's
/// `spec.parameters`, or null.
const GATEKEEPER_VARIABLES: [(&str, &str); 2] = [
    (
        "anyObject",
        r#"has(request.operation) && request.operation == "DELETE" && object == null ? oldObject : object"#,
    ),
    (
        "params",
        "!has(params.spec) ? null : !has(params.spec.parameters) ? null: params.spec.parameters",
    ),
];

/// A template's CEL code, compiled.
pub(crate) struct CelTemplate {
    variables: Variables,
    match_conditions: Vec<(String, Expression)>,
    validations: Vec<PolicyValidation>,
    /// failurePolicy `Fail`.
    fail: bool,
}

impl std::fmt::Debug for CelTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelTemplate")
            .field("validations", &self.validations.len())
            .field("fail", &self.fail)
            .finish()
    }
}

impl CelTemplate {
    /// Compiles `code` (at `field` of the template in `source`). Errors name the field: an
    /// expression that does not compile or is not of the type its place needs (validations
    /// and match conditions bool, messages string), a reserved or repeated name, a
    /// failurePolicy other than `Fail` and `Ignore`.
    pub(crate) fn compile(
        code: &CelSource,
        source: &DocumentSource,
        field: &str,
    ) -> Result<Self, PolicyError> {
        let at = |path: String| format!("{field}.{path}");
        let fail = match code.failure_policy.as_deref() {
            None | Some("Fail") => true,
            Some("Ignore") => false,
            Some(other) => {
                return Err(PolicyError::at(
                    source,
                    at("failurePolicy".into()),
                    format!("unrecognized failure policy: {other}; supported: Fail, Ignore"),
                ));
            }
        };
        let mut variables = Variables::default();
        let builtin = GATEKEEPER_VARIABLES
            .iter()
            .map(|(name, text)| (*name, *text));
        let own = code
            .variables
            .iter()
            .map(|v| (v.name.as_str(), v.expression.as_str()));
        for (index, (name, text)) in builtin.chain(own).enumerate() {
            let own_index = index.checked_sub(GATEKEEPER_VARIABLES.len());
            let field = own_index.map(|i| at(format!("variables[{i}]")));
            if let Some(field) = &field {
                check_name(source, field, name, "variable")?;
                if GATEKEEPER_VARIABLES
                    .iter()
                    .any(|(reserved, _)| *reserved == name)
                {
                    return Err(PolicyError::at(
                        source,
                        format!("{field}.name"),
                        format!("{name:?} is an invalid variable name: it is reserved"),
                    ));
                }
                if variables.names.iter().any(|n| n == name) {
                    return Err(PolicyError::at(
                        source,
                        format!("{field}.name"),
                        format!("Duplicate value: {name:?}"),
                    ));
                }
            }
            let field = field.map_or_else(|| at("variables".into()), |f| format!("{f}.expression"));
            let declarations = Declarations {
                variables: Declared::Typed(&variables.types),
                params: true,
                authorizer: false,
            };
            let expression = compile_expression(source, &field, text, false, &declarations)?;
            variables.push(name, expression).map_err(|unknown| {
                PolicyError::at(
                    source,
                    &field,
                    format!(
                        "Invalid value: {text:?}: compilation failed: undefined field '{unknown}' \
                         (a variable can only use the variables declared before it)"
                    ),
                )
            })?;
        }
        let declarations = Declarations {
            variables: Declared::Typed(&variables.types),
            params: false,
            authorizer: false,
        };
        let compile = |field: &str, text: &str, expected: &[CelType]| {
            if text.trim().is_empty() {
                return Err(PolicyError::at(source, field, "Required value"));
            }
            let expression = compile_expression(source, field, text, false, &declarations)?;
            expect_output(source, field, &expression, expected)?;
            Ok(expression)
        };
        let mut match_conditions = Vec::new();
        for (i, condition) in code.match_conditions.iter().enumerate() {
            let field = at(format!("matchCondition[{i}]"));
            check_name(source, &field, &condition.name, "match condition")?;
            let expression = compile(
                &format!("{field}.expression"),
                &condition.expression,
                &[CelType::Bool],
            )?;
            match_conditions.push((condition.name.clone(), expression));
        }
        let mut validations = Vec::new();
        for (i, validation) in code.validations.iter().enumerate() {
            let field = at(format!("validations[{i}]"));
            let expression = compile(
                &format!("{field}.expression"),
                &validation.expression,
                &[CelType::Bool],
            )?;
            // As Gatekeeper: a messageExpression that does not compile, or is not a string,
            // leaves the message to `message`.
            let message_expression = validation
                .message_expression
                .as_deref()
                .and_then(|text| compile("", text, &[CelType::String]).ok());
            validations.push(PolicyValidation {
                expression,
                message: validation.message.clone(),
                message_expression,
                reason: None,
            });
        }
        Ok(CelTemplate {
            variables,
            match_conditions,
            validations,
            fail,
        })
    }

    /// The violations' messages for one constraint (`constraint`: its whole document) on
    /// `request`: none when a match condition is false (or errs under `Ignore`).
    pub(crate) fn evaluate(&self, request: &CelRequest<'_>, constraint: &Json) -> Vec<String> {
        let scope = Scope::of(request.activation(), Some(constraint), &self.variables);
        if !self.match_conditions.is_empty() {
            match scope.match_conditions(&self.match_conditions) {
                Ok(true) => {}
                Ok(false) => return Vec::new(),
                Err(error) if self.fail => return vec![error],
                Err(_) => return Vec::new(),
            }
        }
        let run = ValidationRun {
            validations: &self.validations,
            variable_count: self.variables.names.len(),
            budget: PER_CALL_COST_LIMIT,
            fail: self.fail,
        };
        run_validations(run, &scope, &|| &scope)
            .failures
            .into_iter()
            .map(|failure| failure.message)
            .collect()
    }
}

/// Refuses an empty name, or one with Gatekeeper's reserved prefix.
fn check_name(
    source: &DocumentSource,
    field: &str,
    name: &str,
    what: &str,
) -> Result<(), PolicyError> {
    if name.is_empty() {
        return Err(PolicyError::at(
            source,
            format!("{field}.name"),
            "Required value",
        ));
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err(PolicyError::at(
            source,
            format!("{field}.name"),
            format!("{name} is not a valid {what}; cannot have {RESERVED_PREFIX:?} as a prefix"),
        ));
    }
    Ok(())
}

/// What CEL templates see of one request: `request` as Gatekeeper builds it from its
/// AdmissionRequest (`transform.RequestToVersionedAttributes`, then the apiserver's
/// `CreateAdmissionRequest`), `namespaceObject`, `object` (null on DELETE) and `oldObject`.
pub(crate) struct CelRequest<'r> {
    request: Json,
    namespace_object: Json,
    object: Option<CelObject<'r>>,
    old_object: Option<CelObject<'r>>,
}

impl<'r> CelRequest<'r> {
    /// The input at `point`: for a request made from an object (`reviewed`: `gator`, audit,
    /// an expansion's resultant), the request Gatekeeper makes of the object alone (kind,
    /// name and namespace; empty resource and user; a resultant's operation at the webhook,
    /// on DELETE with the object as `oldObject`); else the request as sent. gator gives no
    /// Namespace (`namespaceObject` is null); the webhook and audit give the object's.
    pub(crate) fn new(
        request: &'r AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        point: EnforcementPoint,
        reviewed: Option<ReviewedObject<'r>>,
    ) -> Self {
        let is_namespace = request.kind.group.is_empty() && request.kind.kind == "Namespace";
        let (attributes, object, old_object) = match reviewed {
            Some(ReviewedObject { object, operation }) => {
                let text = |pointer: &str| object.pointer(pointer).and_then(Json::as_str);
                let attributes = RequestFields {
                    name: text("/metadata/name"),
                    namespace: text("/metadata/namespace"),
                    operation: operation.map_or("", Operation::as_str),
                    ..RequestFields::of_object(request)
                };
                let object = CelObject::Tree(object);
                match operation {
                    Some(Operation::Delete) => (attributes, None, Some(object)),
                    _ => (attributes, Some(object), None),
                }
            }
            None => {
                let mut attributes = RequestFields::of_request(request);
                if point == EnforcementPoint::Webhook && is_namespace {
                    attributes.namespace = None;
                }
                let object = match request.operation {
                    Operation::Delete => None,
                    _ => request.object.as_ref().map(CelObject::Request),
                };
                let old_object = request.old_object.as_ref().map(CelObject::Request);
                (attributes, object, old_object)
            }
        };
        let namespace = attributes
            .namespace
            .filter(|n| !n.is_empty() && !is_namespace);
        let namespace_object = match (point, namespace) {
            (EnforcementPoint::Gator, _) | (_, None) => Json::Null,
            (_, Some(name)) => namespaces.namespace_object(name),
        };
        CelRequest {
            request: attributes.to_json(),
            namespace_object,
            object,
            old_object,
        }
    }

    fn activation(&self) -> Activation<'_> {
        let mut activation = Activation::new()
            .request(&self.request)
            .namespace_object(&self.namespace_object);
        if let Some(object) = self.object {
            activation = object.bind_object(activation);
        }
        if let Some(old_object) = self.old_object {
            activation = old_object.bind_old_object(activation);
        }
        activation
    }
}

/// The fields of the apiserver's `CreateAdmissionRequest` from Gatekeeper's request: no
/// uid, the kind and resource also as the request's, `dryRun` always set.
struct RequestFields<'r> {
    kind: Json,
    resource: Json,
    sub_resource: Option<&'r str>,
    name: Option<&'r str>,
    namespace: Option<&'r str>,
    operation: &'static str,
    user_info: Json,
    dry_run: bool,
}

impl<'r> RequestFields<'r> {
    fn of_request(request: &'r AdmissionRequest) -> Self {
        RequestFields {
            kind: serde_json::to_value(&request.kind).unwrap_or(Json::Null),
            resource: serde_json::to_value(&request.resource).unwrap_or(Json::Null),
            sub_resource: request.sub_resource.as_deref().filter(|s| !s.is_empty()),
            name: request.name.as_deref(),
            namespace: request.namespace.as_deref(),
            operation: request.operation.as_str(),
            user_info: serde_json::to_value(&request.user_info).unwrap_or(Json::Null),
            dry_run: request.dry_run.unwrap_or(false),
        }
    }

    /// gator's and the audit's request of an object: only its kind (the caller adds name
    /// and namespace).
    fn of_object(request: &'r AdmissionRequest) -> Self {
        RequestFields {
            kind: serde_json::to_value(&request.kind).unwrap_or(Json::Null),
            resource: serde_json::json!({"group": "", "version": "", "resource": ""}),
            sub_resource: None,
            name: None,
            namespace: None,
            operation: "",
            user_info: Json::Object(Map::new()),
            dry_run: false,
        }
    }

    fn to_json(&self) -> Json {
        let mut map = Map::new();
        map.insert("uid".into(), Json::String(String::new()));
        map.insert("kind".into(), self.kind.clone());
        map.insert("resource".into(), self.resource.clone());
        if let Some(sub_resource) = self.sub_resource {
            map.insert("subResource".into(), sub_resource.into());
        }
        map.insert("requestKind".into(), self.kind.clone());
        map.insert("requestResource".into(), self.resource.clone());
        if let Some(sub_resource) = self.sub_resource {
            map.insert("requestSubResource".into(), sub_resource.into());
        }
        for (key, value) in [("name", self.name), ("namespace", self.namespace)] {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                map.insert(key.into(), value.into());
            }
        }
        map.insert("operation".into(), self.operation.into());
        map.insert("userInfo".into(), self.user_info.clone());
        map.insert("dryRun".into(), self.dry_run.into());
        Json::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::NoNamespaces;

    fn template(source: Json) -> Result<CelTemplate, PolicyError> {
        let code: CelSource = serde_json::from_value(source).unwrap();
        let source = DocumentSource {
            file: "template.yaml".into(),
            index: 0,
        };
        CelTemplate::compile(&code, &source, "spec.targets[0].code[0].source")
    }

    fn request(operation: &str, object: Json, old_object: Json) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm",
            "namespace": "apps",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["dev"]},
            "object": object,
            "oldObject": old_object,
        }))
        .unwrap()
    }

    fn constraint(parameters: Option<Json>) -> Json {
        let mut document = json!({
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sProbe",
            "metadata": {"name": "probe"},
            "spec": {},
        });
        if let Some(parameters) = parameters {
            document["spec"]["parameters"] = parameters;
        }
        document
    }

    fn run(template: &CelTemplate, request: &AdmissionRequest, constraint: &Json) -> Vec<String> {
        let input = CelRequest::new(request, &NoNamespaces, EnforcementPoint::Webhook, None);
        template.evaluate(&input, constraint)
    }

    #[test]
    fn messages_are_worded_as_the_validator_words_them() {
        let template = template(json!({
            "variables": [{"name": "wanted", "expression": "variables.params == null ? 'team' : variables.params.label"}],
            "validations": [
                {"expression": "variables.wanted in variables.anyObject.metadata.labels",
                 "messageExpression": "'missing ' + variables.wanted + ' by ' + request.userInfo.username"},
                {"expression": "false", "message": "  always  "},
                {"expression": "1 == 2"},
            ],
        }))
        .unwrap();
        let object = json!({"metadata": {"name": "cm", "labels": {"team": "a"}}});
        let found = run(
            &template,
            &request("CREATE", object.clone(), Json::Null),
            &constraint(Some(json!({"label": "owner"}))),
        );
        assert_eq!(
            found,
            [
                "missing owner by alice",
                "always",
                "failed expression: 1 == 2"
            ]
        );
        let found = run(
            &template,
            &request("CREATE", object, Json::Null),
            &constraint(None),
        );
        assert_eq!(found, ["always", "failed expression: 1 == 2"]);
    }

    #[test]
    fn a_message_expression_that_does_not_compile_falls_back() {
        let template = template(json!({
            "validations": [
                {"expression": "false", "message": "plain", "messageExpression": "'a' + 1"},
                {"expression": "false", "messageExpression": "1"},
            ],
        }))
        .unwrap();
        let review = request("CREATE", json!({}), Json::Null);
        assert_eq!(
            run(&template, &review, &constraint(None)),
            ["plain", "failed expression: false"]
        );
    }

    #[test]
    fn any_object_is_the_old_object_on_delete() {
        let template = template(json!({
            "validations": [{"expression": "object == null && variables.anyObject.metadata.name == 'old'"}],
        }))
        .unwrap();
        let old = json!({"metadata": {"name": "old"}});
        let deleted = request("DELETE", Json::Null, old.clone());
        assert!(run(&template, &deleted, &constraint(None)).is_empty());
        let updated = request("UPDATE", json!({"metadata": {"name": "new"}}), old);
        assert_eq!(run(&template, &updated, &constraint(None)).len(), 1);
    }

    #[test]
    fn errors_follow_the_failure_policy() {
        let source = |policy: &str| {
            json!({
                "failurePolicy": policy,
                "validations": [{"expression": "object.spec.missing == 1"}],
            })
        };
        let object = json!({"spec": {}});
        let review = request("CREATE", object, Json::Null);
        let failing = template(source("Fail")).unwrap();
        let found = run(&failing, &review, &constraint(None));
        assert_eq!(found.len(), 1);
        assert!(found[0].contains("no such key: missing"), "{found:?}");
        let ignoring = template(source("Ignore")).unwrap();
        assert!(run(&ignoring, &review, &constraint(None)).is_empty());
    }

    #[test]
    fn match_conditions_gate_the_validations() {
        let source = |condition: &str, policy: &str| {
            json!({
                "failurePolicy": policy,
                "matchCondition": [{"name": "only-apps", "expression": condition}],
                "validations": [{"expression": "false", "message": "denied"}],
            })
        };
        let review = request("CREATE", json!({"metadata": {}}), Json::Null);
        let none = constraint(None);
        let matching = template(source("request.namespace == 'apps'", "Fail")).unwrap();
        assert_eq!(run(&matching, &review, &none), ["denied"]);
        let skipping = template(source("request.namespace == 'other'", "Fail")).unwrap();
        assert!(run(&skipping, &review, &none).is_empty());
        let erring = template(source("object.metadata.x == 1", "Fail")).unwrap();
        let found = run(&erring, &review, &none);
        assert_eq!(found.len(), 1);
        assert_ne!(found, ["denied"]);
        let ignored = template(source("object.metadata.x == 1", "Ignore")).unwrap();
        assert!(run(&ignored, &review, &none).is_empty());
    }

    #[test]
    fn an_object_review_has_no_operation_or_user() {
        let template = template(json!({
            "validations": [{"expression": "request.operation == '' && !has(request.userInfo.username) && namespaceObject == null && request.name == 'cm'"}],
        }))
        .unwrap();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "apps"}});
        let review = request("CREATE", object.clone(), Json::Null);
        let alone = ReviewedObject {
            object: &object,
            operation: None,
        };
        let input = CelRequest::new(&review, &NoNamespaces, EnforcementPoint::Gator, Some(alone));
        assert!(template.evaluate(&input, &constraint(None)).is_empty());
        // An expansion's resultant deleted at the webhook: the parent's operation, the object
        // as `oldObject` only.
        let template = self::template(json!({
            "validations": [{"expression": "request.operation == 'DELETE' && object == null && oldObject.metadata.name == 'cm'"}],
        }))
        .unwrap();
        let deleted = ReviewedObject {
            object: &object,
            operation: Some(Operation::Delete),
        };
        let input = CelRequest::new(
            &review,
            &NoNamespaces,
            EnforcementPoint::Webhook,
            Some(deleted),
        );
        assert!(template.evaluate(&input, &constraint(None)).is_empty());
    }

    #[test]
    fn bad_code_is_refused_with_its_field() {
        let field = |source: Json| template(source).unwrap_err().field.unwrap_or_default();
        assert_eq!(
            field(json!({"variables": [{"name": "params", "expression": "1"}]})),
            "spec.targets[0].code[0].source.variables[0].name"
        );
        assert_eq!(
            field(json!({"variables": [{"name": "gatekeeper_internal_x", "expression": "1"}]})),
            "spec.targets[0].code[0].source.variables[0].name"
        );
        assert_eq!(
            field(json!({"failurePolicy": "Sometimes"})),
            "spec.targets[0].code[0].source.failurePolicy"
        );
        // Validations see `variables.params`, not the constraint as `params`.
        assert_eq!(
            field(json!({"validations": [{"expression": "has(params.spec)"}]})),
            "spec.targets[0].code[0].source.validations[0].expression"
        );
        assert_eq!(
            field(json!({"validations": [{"expression": "'text'"}]})),
            "spec.targets[0].code[0].source.validations[0].expression"
        );
        assert_eq!(
            field(json!({"matchCondition": [{"name": "", "expression": "true"}]})),
            "spec.targets[0].code[0].source.matchCondition[0].name"
        );
    }
}
