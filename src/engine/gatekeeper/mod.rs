//! OPA Gatekeeper's ConstraintTemplates and Constraints, unchanged: each template's Rego is
//! compiled once (regorus), each constraint matched by its `spec.match` and evaluated with its
//! `spec.parameters`, and the results answered as Gatekeeper's validating webhook answers them
//! (`pkg/webhook/policy.go`): sorted by enforcement action then message (frameworks'
//! `Responses.Results`), each worded `[<constraint name>] <msg>`; `deny` results refuse the
//! request with 403 and the messages joined by new lines, `warn` results are warnings, and
//! `dryrun` results are only counted. ExpansionTemplates make the objects a request's object
//! generates (a Deployment's Pod) reviewed too, their results joined to the request's
//! (`expansion.rs`).

mod cel;
pub mod config;
mod expansion;
mod inventory;
pub(crate) mod matching;
mod parameters;
mod rego;
mod review;

pub use rego::set_rego_timeout;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use regorus::Value as RegoValue;

use self::cel::{CelRequest, CelTemplate};
use self::expansion::{ExpansionNamespace, Expansions, Resultant};
use self::matching::ConstraintMatcher;
use self::rego::{RegoFailure, RegoTemplate};
use super::{
    Decision, DenialStatus, EvalError, NamespaceLookup, PolicyOutcome, ResourceRule, Violation,
    ViolationForm,
};
use crate::admission::{AdmissionRequest, Operation};
use crate::policy::gatekeeper::{
    ADMISSION_TARGET, CelSource, Constraint, ConstraintTemplate, GatekeeperDocument, RegoSource,
};
use crate::policy::{DocumentSource, PolicyError};

/// Where a constraint is enforced, for its `scopedEnforcementActions`, and which review its
/// template sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EnforcementPoint {
    /// The validating webhook (`serve`): `validation.gatekeeper.sh`; the review is the
    /// AdmissionRequest.
    #[default]
    Webhook,
    /// `audit`: `audit.gatekeeper.sh`; the review is built from the object, as Gatekeeper's
    /// audit builds it.
    Audit,
    /// `check` and `test`: `gator.gatekeeper.sh`; the review is built from the object, as
    /// `gator` builds it.
    Gator,
}

impl EnforcementPoint {
    /// The enforcement point's name in `scopedEnforcementActions`.
    fn name(self) -> &'static str {
        match self {
            EnforcementPoint::Webhook => "validation.gatekeeper.sh",
            EnforcementPoint::Audit => "audit.gatekeeper.sh",
            EnforcementPoint::Gator => "gator.gatekeeper.sh",
        }
    }
}

/// What a Gatekeeper evaluation needs besides the request.
#[derive(Debug, Clone, Copy)]
pub struct GatekeeperContext<'a> {
    /// Where the constraints are enforced.
    pub point: EnforcementPoint,
    /// `data.inventory`.
    pub inventory: Option<&'a Inventory>,
    /// The object as written, when the request was made from it alone (the review is then
    /// built from it, as `gator` and Gatekeeper's audit build it).
    pub from_object: Option<&'a serde_json::Value>,
    /// Which code runs of a template that carries both engines.
    pub engine: TemplateEngine,
    /// When a Rego template's evaluation is stopped (CEL's is bounded by its cost limits);
    /// `None` offline, where `--rego-timeout` alone bounds it.
    pub deadline: Option<Instant>,
}

/// Which code of a template that carries both `K8sNativeValidation` and `Rego` runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TemplateEngine {
    /// The CEL code, as Gatekeeper chooses (its CEL driver comes before its Rego driver).
    #[default]
    Preferred,
    /// The Rego code (`portcullis test --compare-engines` runs it beside the CEL code).
    Rego,
}

/// An enforcement action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Deny,
    Dryrun,
    Warn,
}

impl Action {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "deny" => Some(Action::Deny),
            "dryrun" => Some(Action::Dryrun),
            "warn" => Some(Action::Warn),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Dryrun => "dryrun",
            Action::Warn => "warn",
        }
    }
}

/// A constraint's enforcement: one action, or (`scoped`) actions per enforcement point.
#[derive(Debug, Clone)]
enum Enforcement {
    Single(Action),
    Scoped(Vec<(Action, Vec<String>)>),
}

impl Enforcement {
    /// The actions at `point`: for `scoped`, those whose enforcement points name it (or `*`).
    fn actions(&self, point: EnforcementPoint) -> Vec<Action> {
        match self {
            Enforcement::Single(action) => vec![*action],
            Enforcement::Scoped(scoped) => scoped
                .iter()
                .filter(|(_, points)| points.iter().any(|p| p == "*" || p == point.name()))
                .map(|(action, _)| *action)
                .collect(),
        }
    }

    /// The action Gatekeeper sorts results by: the constraint's `enforcementAction`.
    fn sort_key(&self) -> &'static str {
        match self {
            Enforcement::Single(action) => action.as_str(),
            Enforcement::Scoped(_) => "scoped",
        }
    }
}

/// `data.inventory`: the objects templates may compare against, as Gatekeeper keeps them:
/// `cluster[apiVersion][kind][name]` for cluster-scoped objects and
/// `namespace[namespace][apiVersion][kind][name]` for the others.
#[derive(Debug, Clone)]
pub struct Inventory(RegoValue);

impl Inventory {
    /// The inventory of `objects` (those without `apiVersion`, `kind` or a name are left out).
    pub fn of<'v>(objects: impl IntoIterator<Item = &'v serde_json::Value>) -> Self {
        let mut inventory = serde_json::json!({"cluster": {}, "namespace": {}});
        for object in objects {
            let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
            let (Some(api_version), Some(kind), Some(name)) =
                (text("/apiVersion"), text("/kind"), text("/metadata/name"))
            else {
                continue;
            };
            let path: Vec<&str> = match text("/metadata/namespace").filter(|n| !n.is_empty()) {
                Some(namespace) => vec!["namespace", namespace, api_version, kind],
                None => vec!["cluster", api_version, kind],
            };
            let names = path.into_iter().fold(&mut inventory, |at, key| {
                if !at.is_object() {
                    *at = serde_json::Value::Object(Default::default());
                }
                match at {
                    serde_json::Value::Object(map) => map
                        .entry(key)
                        .or_insert_with(|| serde_json::Value::Object(Default::default())),
                    other => other,
                }
            });
            if let serde_json::Value::Object(names) = names {
                names.insert(name.to_owned(), object.clone());
            }
        }
        Inventory(RegoValue::from(inventory))
    }
}

/// A template's code: the engine Gatekeeper runs it with, CEL where it has both.
#[derive(Debug)]
enum TemplateCode {
    Rego(Box<RegoTemplate>),
    Cel(CelTemplate),
}

/// A template, compiled.
#[derive(Debug)]
struct CompiledTemplate {
    code: TemplateCode,
    /// The Rego of a template whose CEL code runs, or why it does not compile: Gatekeeper
    /// never compiles it, so it is only run on request ([`TemplateEngine::Rego`]).
    other_rego: Option<Result<TemplateCode, String>>,
    /// The schema of the constraints' `spec.parameters`.
    schema: Option<serde_json::Value>,
    /// `spec.targets[0].operations`: the operations it reviews at the webhook (none: all).
    operations: Vec<String>,
}

impl CompiledTemplate {
    /// The code `engine` runs, or why it does not compile.
    fn code(&self, engine: TemplateEngine) -> Result<&TemplateCode, &str> {
        match (&self.other_rego, engine) {
            (Some(other), TemplateEngine::Rego) => other.as_ref().map_err(String::as_str),
            _ => Ok(&self.code),
        }
    }

    /// Whether the template reviews `operation` at `point`: frameworks' `Client.Review`
    /// skips a template whose operations leave it out, at the webhook only.
    fn reviews(&self, operation: Operation, point: EnforcementPoint) -> bool {
        point != EnforcementPoint::Webhook
            || self.operations.is_empty()
            || self
                .operations
                .iter()
                .any(|o| o == "*" || o == operation.as_str())
    }
}

/// A constraint, compiled.
struct CompiledConstraint {
    kind: String,
    name: String,
    /// `<kind>/<name>`: the policy its metrics and violations name.
    policy: Arc<str>,
    template: usize,
    matcher: ConstraintMatcher,
    parameters: RegoValue,
    /// The whole document: CEL templates' `params`.
    document: serde_json::Value,
    enforcement: Enforcement,
}

/// Every template and constraint of a policy set.
#[derive(Default)]
pub struct Gatekeeper {
    templates: Vec<CompiledTemplate>,
    /// In the order Gatekeeper lists them: by kind, then name.
    constraints: Vec<CompiledConstraint>,
    /// The Config: namespaces excluded per process, kinds synced (`config.rs`).
    config: config::CompiledConfig,
    /// The ExpansionTemplates (`expansion.rs`).
    expansions: Expansions,
}

impl std::fmt::Debug for Gatekeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatekeeper")
            .field("templates", &self.templates.len())
            .field("constraints", &self.constraints.len())
            .finish()
    }
}

/// One result: a violation of a constraint.
struct Outcome<'g> {
    constraint: &'g CompiledConstraint,
    msg: String,
    /// The enforcement action of the ExpansionTemplate whose resultant it is about, when it
    /// sets one (Gatekeeper's `OverrideEnforcementAction`).
    action_override: Option<Action>,
}

impl Outcome<'_> {
    /// The action Gatekeeper sorts results by.
    fn sort_key(&self) -> &'static str {
        match self.action_override {
            Some(action) => action.as_str(),
            None => self.constraint.enforcement.sort_key(),
        }
    }

    /// The actions taken at `point`: the override, when the constraint acts there at all.
    fn actions(&self, point: EnforcementPoint) -> Vec<Action> {
        let actions = self.constraint.enforcement.actions(point);
        match self.action_override {
            Some(action) if !actions.is_empty() => vec![action],
            _ => actions,
        }
    }
}

/// What the review of a request is made of, besides the request.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReviewedObject<'a> {
    /// The object, as written or as generated.
    pub(super) object: &'a serde_json::Value,
    /// The operation the review carries (a resultant's at the webhook: its parent's); none
    /// for an object reviewed alone. On DELETE the object is the old object.
    pub(super) operation: Option<Operation>,
}

fn template_error(source: &DocumentSource, field: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::at(source, field, message)
}

/// A template's Rego: its module, libraries, syntax version, and the field they are at.
struct RegoCode {
    rego: String,
    libs: Vec<String>,
    version: Option<String>,
    field: String,
}

/// The code of a template's admission target: its `code` entries of engine `Rego` and
/// `K8sNativeValidation` (the first of each), or the `rego`/`libs` of older templates.
#[derive(Default)]
struct TargetCode {
    rego: Option<RegoCode>,
    cel: Option<(CelSource, String)>,
}

/// Reads a `code` entry's source as `T`, errors at `field`.
fn code_source<T: serde::de::DeserializeOwned>(
    source: &DocumentSource,
    field: &str,
    value: &serde_json::Value,
) -> Result<T, PolicyError> {
    crate::policy::from_document(source, value.clone()).map_err(|e| {
        PolicyError::at(
            source,
            format!("{field}.{}", e.field.unwrap_or_default()),
            e.message,
        )
    })
}

fn code_of(
    template: &ConstraintTemplate,
    source: &DocumentSource,
) -> Result<TargetCode, PolicyError> {
    let targets = &template.spec.targets;
    if targets.len() != 1 {
        return Err(template_error(
            source,
            "spec.targets",
            format!(
                "a ConstraintTemplate needs exactly one target, {ADMISSION_TARGET}; it has {}",
                targets.len()
            ),
        ));
    }
    let target = &targets[0];
    if target.target != ADMISSION_TARGET {
        return Err(template_error(
            source,
            "spec.targets[0].target",
            format!(
                "unsupported target {:?}; supported: {ADMISSION_TARGET}",
                target.target
            ),
        ));
    }
    let mut code = TargetCode::default();
    for (index, entry) in target.code.iter().enumerate() {
        let field = format!("spec.targets[0].code[{index}].source");
        match entry.engine.as_str() {
            "Rego" if code.rego.is_none() => {
                let rego: RegoSource = code_source(source, &field, &entry.source)?;
                code.rego = Some(RegoCode {
                    rego: rego.rego,
                    libs: rego.libs,
                    version: rego.version,
                    field,
                });
            }
            "K8sNativeValidation" if code.cel.is_none() => {
                code.cel = Some((code_source(source, &field, &entry.source)?, field));
            }
            "Rego" | "K8sNativeValidation" => {}
            other => {
                return Err(template_error(
                    source,
                    &format!("spec.targets[0].code[{index}].engine"),
                    format!(
                        "unsupported engine {other:?}; supported: \"Rego\", \"K8sNativeValidation\""
                    ),
                ));
            }
        }
    }
    if code.rego.is_none() {
        code.rego = target
            .rego
            .clone()
            .filter(|rego| !rego.trim().is_empty())
            .map(|rego| RegoCode {
                rego,
                libs: target.libs.clone(),
                version: None,
                field: "spec.targets[0]".to_owned(),
            });
    }
    Ok(code)
}

/// Compiles a template's Rego.
fn compile_rego(source: &DocumentSource, code: RegoCode) -> Result<RegoTemplate, PolicyError> {
    let RegoCode {
        rego,
        libs,
        version,
        field,
    } = code;
    RegoTemplate::compile(&rego, &libs, version.as_deref()).map_err(|error| {
        template_error(
            source,
            &format!("{field}.{}", error.module),
            format!("invalid ConstraintTemplate: {}", error.message),
        )
    })
}

/// What one review of a request (the one sent, or a resultant) needs besides the request.
#[derive(Clone, Copy)]
struct ReviewPass<'a, 'g> {
    point: EnforcementPoint,
    inventory: Option<&'a Inventory>,
    engine: TemplateEngine,
    namespaces: &'a dyn NamespaceLookup,
    /// The object the review is made of (`None`: the request as sent).
    reviewed: Option<ReviewedObject<'a>>,
    /// The resultant reviewed, if it is one.
    generated: Option<&'a Resultant<'g>>,
    /// When Rego evaluation is stopped.
    deadline: Option<Instant>,
}

/// Why a review stopped before every constraint was evaluated.
enum ReviewStopped {
    /// The whole request was failed (its namespace could not be read), in the decision.
    RequestFailed,
    /// A Rego evaluation was still running at the deadline.
    DeadlineExceeded,
}

impl Gatekeeper {
    /// Compiles templates and constraints. Errors name the document and field (and for Rego,
    /// the module and line): a template whose Rego does not compile, an unknown engine, a
    /// constraint whose kind no template makes, an unknown enforcement action.
    pub(crate) fn compile(
        documents: &[(&DocumentSource, &GatekeeperDocument)],
    ) -> Result<Self, PolicyError> {
        let mut gatekeeper = Gatekeeper {
            config: config::CompiledConfig::compile(documents)?,
            expansions: Expansions::compile(documents)?,
            ..Gatekeeper::default()
        };
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (source, document) in documents {
            let GatekeeperDocument::Template(template) = document else {
                continue;
            };
            let kind = template.spec.crd.spec.names.kind.clone();
            if kind.is_empty() {
                return Err(template_error(
                    source,
                    "spec.crd.spec.names.kind",
                    "Required value",
                ));
            }
            if template.metadata.name != kind.to_lowercase() {
                return Err(template_error(
                    source,
                    "metadata.name",
                    format!(
                        "invalid ConstraintTemplate: the ConstraintTemplate's name {:?} is not equal to the lowercase of CRD's Kind: {:?}",
                        template.metadata.name,
                        kind.to_lowercase()
                    ),
                ));
            }
            let (code, other_rego) = match code_of(template, source)? {
                // As Gatekeeper's client: the CEL driver comes first.
                TargetCode {
                    cel: Some((cel, field)),
                    rego,
                } => (
                    TemplateCode::Cel(CelTemplate::compile(&cel, source, &field)?),
                    rego.map(|rego| {
                        compile_rego(source, rego)
                            .map(|rego| TemplateCode::Rego(Box::new(rego)))
                            .map_err(|e| e.to_string())
                    }),
                ),
                TargetCode {
                    rego: Some(rego), ..
                } => (
                    TemplateCode::Rego(Box::new(compile_rego(source, rego)?)),
                    None,
                ),
                TargetCode {
                    rego: None,
                    cel: None,
                } => {
                    return Err(template_error(
                        source,
                        "spec.targets[0]",
                        "the template has no code: give `rego` or a `code` entry of engine Rego or K8sNativeValidation",
                    ));
                }
            };
            if kinds
                .insert(kind.clone(), gatekeeper.templates.len())
                .is_some()
            {
                return Err(template_error(
                    source,
                    "spec.crd.spec.names.kind",
                    format!("another ConstraintTemplate makes constraint kind {kind:?}"),
                ));
            }
            let operations = template.spec.targets[0].operations.clone();
            let schema = template
                .spec
                .crd
                .spec
                .validation
                .as_ref()
                .filter(|v| v.legacy_schema != Some(true))
                .and_then(|v| v.open_api_v3_schema.clone());
            gatekeeper.templates.push(CompiledTemplate {
                code,
                other_rego,
                operations,
                schema,
            });
        }
        let mut constraints = Vec::new();
        for (source, document) in documents {
            let GatekeeperDocument::Constraint(constraint) = document else {
                continue;
            };
            let compiled = Self::compile_constraint(source, constraint, &kinds)?;
            if let (Some(schema), Some(parameters)) = (
                &gatekeeper.templates[compiled.template].schema,
                &constraint.spec.parameters,
            ) {
                parameters::check(schema, parameters, "spec.parameters").map_err(|message| {
                    PolicyError::at(source, "", format!("invalid constraint: {message}"))
                })?;
            }
            constraints.push(compiled);
        }
        constraints
            .sort_by(|a: &CompiledConstraint, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        gatekeeper.constraints = constraints;
        Ok(gatekeeper)
    }

    fn compile_constraint(
        source: &DocumentSource,
        constraint: &Constraint,
        kinds: &BTreeMap<String, usize>,
    ) -> Result<CompiledConstraint, PolicyError> {
        let Some(&template) = kinds.get(&constraint.kind) else {
            return Err(template_error(
                source,
                "kind",
                format!(
                    "no ConstraintTemplate makes constraint kind {:?} (known: {})",
                    constraint.kind,
                    kinds.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        let spec = &constraint.spec;
        let action = |text: &str, field: &str| {
            Action::parse(text).ok_or_else(|| {
                template_error(
                    source,
                    field,
                    format!("Unsupported value: {text:?}: supported values: \"deny\", \"dryrun\", \"warn\", \"scoped\""),
                )
            })
        };
        let enforcement = match spec.enforcement_action.as_deref().unwrap_or("deny") {
            "scoped" => {
                let mut scoped = Vec::new();
                for (index, entry) in spec.scoped_enforcement_actions.iter().enumerate() {
                    let field = format!("spec.scopedEnforcementActions[{index}].action");
                    scoped.push((
                        action(&entry.action, &field)?,
                        entry
                            .enforcement_points
                            .iter()
                            .map(|p| p.name.clone())
                            .collect(),
                    ));
                }
                Enforcement::Scoped(scoped)
            }
            other => Enforcement::Single(action(other, "spec.enforcementAction")?),
        };
        let matcher = ConstraintMatcher::new(spec.match_.as_ref()).map_err(
            |(field, message): (String, String)| template_error(source, &field, message),
        )?;
        let parameters = spec
            .parameters
            .clone()
            .unwrap_or(serde_json::Value::Object(Default::default()));
        Ok(CompiledConstraint {
            kind: constraint.kind.clone(),
            name: constraint.metadata.name.clone(),
            policy: format!("{}/{}", constraint.kind, constraint.metadata.name).into(),
            template,
            matcher,
            parameters: RegoValue::from(parameters),
            document: constraint.document.clone(),
            enforcement,
        })
    }

    /// Whether there is no constraint.
    pub fn is_empty(&self) -> bool {
        self.constraints.is_empty()
    }

    /// Whether reviews read the request's objects as trees: ExpansionTemplates generate
    /// their resultants from one. Templates, constraints' matching and the excluder read
    /// either form.
    pub fn reads_trees(&self) -> bool {
        !self.constraints.is_empty() && !self.expansions.is_empty()
    }

    /// How many constraints there are.
    pub fn rule_count(&self) -> usize {
        self.constraints.len()
    }

    /// Whether some constraint may apply to `request` at the webhook, judged from its
    /// envelope and namespace labels (the Config's webhook exclusions included), or to an
    /// object an ExpansionTemplate generates from it.
    pub fn wants(&self, request: &AdmissionRequest, namespaces: &dyn NamespaceLookup) -> bool {
        !self.config.webhook_skips_envelope(request)
            && !self.constraints.is_empty()
            && (self.expansions.apply_to(&request.kind)
                || self
                    .constraints
                    .iter()
                    .any(|constraint| constraint.matcher.may_match(request, namespaces)))
    }

    /// The webhook rules that reach every request a constraint may apply to: the kinds its
    /// match names (as resources), and the kinds ExpansionTemplates expand, every operation
    /// but CONNECT.
    pub fn resource_rules(&self) -> Vec<ResourceRule> {
        let operations = [Operation::Create, Operation::Update, Operation::Delete];
        let mut rules = Vec::new();
        if !self.constraints.is_empty() {
            for (group, _, kind) in self.expansions.expanded_kinds() {
                let resource = super::matching::plural_resource(&kind);
                rules.push(ResourceRule::new(&group, &[resource.as_str()], &operations));
            }
        }
        for constraint in &self.constraints {
            let Some(kinds) = constraint.matcher.kinds() else {
                rules.push(ResourceRule::new("*", &["*"], &operations));
                continue;
            };
            for (groups, kinds) in kinds {
                let groups = if groups.is_empty() {
                    vec!["*".to_owned()]
                } else {
                    groups
                };
                let resources: Vec<String> = if kinds.is_empty() {
                    vec!["*".to_owned()]
                } else {
                    kinds
                        .iter()
                        .map(|kind| super::matching::plural_resource(kind))
                        .collect()
                };
                for group in &groups {
                    let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
                    rules.push(ResourceRule::new(group, &resources, &operations));
                }
            }
        }
        rules
    }

    /// The objects ExpansionTemplates generate from what is reviewed at `point` (the
    /// webhook's request, or the object alone), or the message of the error that fails the
    /// review, as Gatekeeper words it there.
    fn resultants(
        &self,
        request: &AdmissionRequest,
        point: EnforcementPoint,
        from_object: Option<&serde_json::Value>,
    ) -> Result<Vec<Resultant<'_>>, String> {
        let text = |object: &'_ serde_json::Value, pointer: &str| {
            object
                .pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let (object, namespace, parent_namespace, operation) = match (point, from_object) {
            (_, Some(object)) => {
                let own = text(object, "/metadata/namespace").filter(|n| !n.is_empty());
                let namespace = match (point, own.clone()) {
                    // gator gives an object without a namespace an empty Namespace.
                    (EnforcementPoint::Gator, own) => {
                        ExpansionNamespace::Of(own.unwrap_or_default())
                    }
                    (_, Some(own)) => ExpansionNamespace::Of(own),
                    (_, None) => ExpansionNamespace::Parent,
                };
                (object, namespace, text(object, "/metadata/namespace"), None)
            }
            (_, None) => {
                let object = match request.operation {
                    Operation::Delete => request.old_object.as_deref(),
                    _ => request.object.as_deref(),
                };
                let Some(object) = object else {
                    return Ok(Vec::new());
                };
                // The webhook sets the object's namespace to the request's, and reads that
                // Namespace.
                let own = request.namespace.clone().filter(|n| !n.is_empty());
                let namespace = match &own {
                    Some(own) => ExpansionNamespace::Of(own.clone()),
                    None => ExpansionNamespace::Parent,
                };
                (object, namespace, own, Some(request.operation))
            }
        };
        self.expansions
            .expand(
                request,
                object,
                &namespace,
                parent_namespace.as_deref(),
                operation,
            )
            .map_err(|error| match point {
                EnforcementPoint::Gator => {
                    let name = text(object, "/metadata/name").unwrap_or_default();
                    format!("expanding resource {name}: error expanding resource {name}: {error}")
                }
                _ => format!("unable to expand object: {error}"),
            })
    }

    /// Reviews `request` (the one sent, or an expansion's resultant) against every constraint
    /// that applies to it, adding its results to `outcomes`; `Err` when the whole request was
    /// failed instead (its namespace could not be read), or the deadline passed.
    fn review_into<'g>(
        &'g self,
        request: &AdmissionRequest,
        pass: &ReviewPass<'_, 'g>,
        outcomes: &mut Vec<Outcome<'g>>,
        decision: &mut Decision,
    ) -> Result<(), ReviewStopped> {
        let ReviewPass {
            point,
            inventory,
            engine,
            namespaces,
            reviewed,
            generated,
            deadline,
        } = *pass;
        let mut review: Option<RegoValue> = None;
        let mut cel_request: Option<CelRequest<'_>> = None;
        for constraint in &self.constraints {
            if let Some(failure) = constraint
                .matcher
                .namespace_read_failure(request, namespaces)
            {
                // Gatekeeper's webhook reads the namespace of every namespaced request it
                // reviews; when that read fails, it answers the error with a 500.
                let namespace = request.namespace.as_deref().unwrap_or("");
                decision.fail_request(
                    &constraint.name,
                    DenialStatus {
                        code: 500,
                        reason: "InternalError",
                    },
                    format!(
                        "[{}] namespace {namespace:?} could not be read: {}",
                        constraint.name, failure.message
                    ),
                );
                return Err(ReviewStopped::RequestFailed);
            }
            let template = &self.templates[constraint.template];
            if !template.reviews(request.operation, point) {
                continue;
            }
            let is_generated = generated.is_some();
            let started = std::time::Instant::now();
            let messages = if let Some(error) =
                constraint
                    .matcher
                    .match_error(request, namespaces, is_generated)
            {
                // frameworks' autoreject: the constraint's match could not be evaluated (a
                // namespace selector for an object whose Namespace is unknown).
                vec![error]
            } else if !constraint
                .matcher
                .matches(request, namespaces, is_generated)
            {
                continue;
            } else {
                match template.code(engine) {
                    Err(error) => vec![error.to_owned()],
                    Ok(TemplateCode::Rego(rego)) => {
                        let review = review.get_or_insert_with(|| {
                            review::review(request, namespaces, point, reviewed)
                        });
                        let mut input = RegoValue::new_object();
                        if let Ok(map) = input.as_object_mut() {
                            map.insert(RegoValue::from("review"), review.clone());
                            map.insert(
                                RegoValue::from("parameters"),
                                constraint.parameters.clone(),
                            );
                        }
                        match rego.evaluate(
                            input,
                            inventory.map(|i| &i.0),
                            deadline,
                            rego::rego_timeout(),
                        ) {
                            Ok(violations) => violations.into_iter().map(|v| v.msg).collect(),
                            // As the driver: an evaluation error is a result of every
                            // constraint of the kind.
                            Err(RegoFailure::Error(error)) => vec![error],
                            Err(RegoFailure::DeadlineExceeded) => {
                                return Err(ReviewStopped::DeadlineExceeded);
                            }
                        }
                    }
                    Ok(TemplateCode::Cel(cel)) => {
                        let input = cel_request.get_or_insert_with(|| {
                            CelRequest::new(request, namespaces, point, reviewed)
                        });
                        cel.evaluate(input, &constraint.document)
                    }
                }
            };
            let action_override = generated.and_then(|resultant| resultant.template.action);
            decision.outcomes.push(PolicyOutcome {
                kind: "Constraint",
                policy: constraint.policy.clone(),
                binding: None,
                action: action_override.map_or(constraint.enforcement.sort_key(), Action::as_str),
                result: if messages.is_empty() { "pass" } else { "fail" },
            });
            decision
                .timings
                .push((constraint.policy.clone(), started.elapsed()));
            outcomes.extend(messages.into_iter().map(|msg| Outcome {
                constraint,
                msg: match generated {
                    Some(resultant) => format!("[Implied by {}] {msg}", resultant.template.name),
                    None => msg,
                },
                action_override,
            }));
        }
        Ok(())
    }

    /// Evaluates every constraint that applies to `request` at `point` and records the
    /// results in `decision`, as Gatekeeper's webhook answers them. `Err` when a Rego
    /// evaluation was still running at the context's deadline: it is stopped, and no
    /// decision is made (Gatekeeper's webhook is cancelled with its request).
    pub fn validate(
        &self,
        request: &AdmissionRequest,
        namespaces: &dyn NamespaceLookup,
        context: GatekeeperContext<'_>,
        decision: &mut Decision,
    ) -> Result<(), EvalError> {
        let GatekeeperContext {
            point,
            inventory,
            from_object,
            engine,
            deadline,
        } = context;
        if self.constraints.is_empty() {
            return Ok(());
        }
        // The Config excludes the request's namespace from this point's process.
        if self.config.skips(request, point) {
            return Ok(());
        }
        let stopped = |stop: ReviewStopped| match stop {
            ReviewStopped::RequestFailed => Ok(()),
            ReviewStopped::DeadlineExceeded => Err(EvalError::DeadlineExceeded),
        };
        let mut outcomes: Vec<Outcome<'_>> = Vec::new();
        let pass = ReviewPass {
            point,
            inventory,
            engine,
            namespaces,
            reviewed: from_object.map(|object| ReviewedObject {
                object,
                operation: None,
            }),
            generated: None,
            deadline,
        };
        if let Err(stop) = self.review_into(request, &pass, &mut outcomes, decision) {
            return stopped(stop);
        }
        // Gatekeeper's webhook, audit and gator expand what they review, but gator not an
        // AdmissionReview it is given.
        if !self.expansions.is_empty()
            && (point == EnforcementPoint::Webhook || from_object.is_some())
        {
            let resultants = match self.resultants(request, point, from_object) {
                Ok(resultants) => resultants,
                Err(message) => {
                    decision.fail_request(
                        "ExpansionTemplate",
                        DenialStatus {
                            code: 500,
                            reason: "InternalError",
                        },
                        message,
                    );
                    return Ok(());
                }
            };
            for resultant in &resultants {
                let pass = ReviewPass {
                    reviewed: Some(ReviewedObject {
                        object: resultant.object(),
                        operation: resultant.operation,
                    }),
                    generated: Some(resultant),
                    ..pass
                };
                if let Err(stop) =
                    self.review_into(&resultant.request, &pass, &mut outcomes, decision)
                {
                    return stopped(stop);
                }
            }
        }
        outcomes.sort_by(|a, b| (a.sort_key(), &a.msg).cmp(&(b.sort_key(), &b.msg)));
        for outcome in outcomes {
            let text = format!("[{}] {}", outcome.constraint.name, outcome.msg);
            for action in outcome.actions(point) {
                match action {
                    Action::Deny => decision.violations.push(Violation {
                        policy: outcome.constraint.policy.to_string(),
                        rule: String::new(),
                        path: String::new(),
                        message: text.clone(),
                        form: ViolationForm::Gatekeeper,
                    }),
                    Action::Warn => decision.warnings.push(text.clone()),
                    // Gatekeeper's audit lists dryrun violations with the others; here they
                    // are audit annotations of the constraint, which `audit` reports.
                    Action::Dryrun if point == EnforcementPoint::Audit => {
                        let key = outcome.constraint.policy.to_string();
                        let entry = decision.audit_annotations.entry(key).or_default();
                        if !entry.is_empty() {
                            entry.push('\n');
                        }
                        entry.push_str(&text);
                    }
                    Action::Dryrun => {}
                }
            }
        }
        Ok(())
    }
}
