//! The CEL `authorizer` of admission policies (and native `cel` rules): who a check asks
//! about, and who answers it. In `serve` a [`SubjectAccessReviewer`] asks the cluster; in
//! `check` and `test` an [`AnswerTable`] gives the answers (`--authorizer allow|deny|FILE`).
//!
//! The apiserver builds the questions in `k8s.io/apiserver` v0.37.2
//! `pkg/cel/library/authz.go` and `pkg/admission/plugin/cel/activation.go`: the requesting
//! user (name, uid, groups, extra), or the service account `serviceAccount(ns, name)` names;
//! a resource check asks for API version `*`; `authorizer.requestResource` is the request's
//! own resource, subresource, namespace and name.

mod answers;
mod review;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crate::admission::AdmissionRequest;
use crate::expressions::{AuthorizationCheck, AuthorizationDecision, Authorizer};

pub use answers::{Answer, AnswerRule, AnswerTable, AnswerTableError};
pub use review::{AuthorizerMetrics, ResultLabels, ReviewSettings, SubjectAccessReviewer};

/// Who a question is about: a user as the apiserver authenticated it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Subject {
    /// User name.
    pub user: String,
    /// User UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra authenticator attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Subject {
    /// The requesting user of `request`.
    pub fn of_request(request: &AdmissionRequest) -> Self {
        let user = &request.user_info;
        Subject {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        }
    }

    /// The service account `namespace/name`, as `ServiceAccountInfo.UserInfo` makes it:
    /// `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and
    /// `system:serviceaccounts:<ns>`, no uid, no extra.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Subject {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            extra: BTreeMap::new(),
        }
    }
}

/// One whole authorization question: who, and what. Answers are cached on all of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessQuestion {
    /// Who.
    pub subject: Subject,
    /// What (its `service_account` already resolved into [`AccessQuestion::subject`]).
    pub check: AuthorizationCheck,
}

/// Answers authorization questions: the cluster, or a table of answers.
pub trait AccessReviewer: Send + Sync {
    /// The answer to `question`. `Err` means there is no one to ask at all: the expression
    /// that asked fails (and its policy's `failurePolicy` applies); an authorizer that was
    /// asked and failed answers with [`AuthorizationDecision::error`] set, as the apiserver's
    /// authorizer does, and the expression sees it in `errored()` and `error()`.
    fn review(&self, question: &AccessQuestion) -> Result<AuthorizationDecision, String>;

    /// [`AccessReviewer::review`] for a request due at `deadline`: a reviewer that waits
    /// (for the cluster) waits no longer than that. By default, as `review`.
    fn review_by(
        &self,
        question: &AccessQuestion,
        deadline: Option<Instant>,
    ) -> Result<AuthorizationDecision, String> {
        let _ = deadline;
        self.review(question)
    }
}

/// What answers when nothing was configured to: every check fails its expression with
/// this text.
pub const NO_AUTHORIZER: &str = "no authorizer is configured: `serve` asks the cluster with \
     SubjectAccessReviews (it needs a cluster), `check` and `test` take --authorizer \
     allow|deny|FILE (or a PolicyTest's authorizer)";

/// The authorizer of one admission request: its user's questions, to `reviewer`.
struct RequestAuthorizer {
    reviewer: Arc<dyn AccessReviewer>,
    subject: Subject,
    deadline: Option<Instant>,
}

impl Authorizer for RequestAuthorizer {
    fn authorize(&self, check: &AuthorizationCheck) -> Result<AuthorizationDecision, String> {
        let mut check = check.clone();
        let subject = match check.service_account.take() {
            Some((namespace, name)) => Subject::service_account(&namespace, &name),
            None => self.subject.clone(),
        };
        self.reviewer
            .review_by(&AccessQuestion { subject, check }, self.deadline)
    }
}

/// The `authorizer` of `request`'s expressions: its user's questions, answered by
/// `reviewer` (by [`NO_AUTHORIZER`]'s error without one) before the request's `deadline`.
pub fn request_authorizer(
    reviewer: Option<&Arc<dyn AccessReviewer>>,
    request: &AdmissionRequest,
    deadline: Option<Instant>,
) -> Arc<dyn Authorizer> {
    let reviewer = reviewer.cloned().unwrap_or_else(|| Arc::new(Unconfigured));
    Arc::new(RequestAuthorizer {
        reviewer,
        subject: Subject::of_request(request),
        deadline,
    })
}

struct Unconfigured;

impl AccessReviewer for Unconfigured {
    fn review(&self, _: &AccessQuestion) -> Result<AuthorizationDecision, String> {
        Err(NO_AUTHORIZER.to_owned())
    }
}

/// What `authorizer.requestResource` checks: the request's resource as sent (its
/// `requestResource` and `requestSubResource` when the apiserver converted it for the
/// webhook, as the in-process policies see the original), its namespace and name.
pub fn request_resource(request: &AdmissionRequest) -> AuthorizationCheck {
    let (resource, subresource) = match &request.request_resource {
        Some(resource) => (resource, request.request_sub_resource.clone()),
        None => (&request.resource, request.sub_resource.clone()),
    };
    AuthorizationCheck {
        group: resource.group.clone(),
        resource: resource.resource.clone(),
        subresource: subresource.unwrap_or_default(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name: request.name.clone().unwrap_or_default(),
        ..AuthorizationCheck::default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::expressions::{Activation, Expression};

    /// Records every question and allows `get`.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<AccessQuestion>>);

    impl AccessReviewer for Recorder {
        fn review(&self, question: &AccessQuestion) -> Result<AuthorizationDecision, String> {
            self.0.lock().unwrap().push(question.clone());
            Ok(AuthorizationDecision {
                allowed: question.check.verb == "get",
                ..AuthorizationDecision::default()
            })
        }
    }

    fn request() -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "requestResource": {"group": "extensions", "version": "v1beta1", "resource": "deployments"},
            "requestSubResource": "scale",
            "namespace": "team-a",
            "name": "web",
            "operation": "UPDATE",
            "userInfo": {"username": "alice", "uid": "42", "groups": ["dev"], "extra": {"scopes": ["a"]}},
        }))
        .unwrap()
    }

    fn ask(source: &str, reviewer: &Arc<dyn AccessReviewer>) -> Result<cel::Value, String> {
        let request = request();
        let activation = Activation::new().authorizer(
            request_authorizer(Some(reviewer), &request, None),
            Some(request_resource(&request)),
        );
        Expression::compile(source, false)
            .unwrap()
            .evaluate(&activation)
    }

    #[test]
    fn questions_carry_the_whole_user_or_the_service_account() {
        let recorder = Arc::new(Recorder::default());
        let reviewer: Arc<dyn AccessReviewer> = recorder.clone();
        assert_eq!(
            ask(
                "authorizer.requestResource.check('get').allowed()",
                &reviewer
            ),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            ask(
                "authorizer.serviceAccount('kube-system', 'builder').group('').resource('pods').check('create').allowed()",
                &reviewer
            ),
            Ok(cel::Value::Bool(false))
        );
        let asked = recorder.0.lock().unwrap().clone();
        assert_eq!(asked.len(), 2);
        assert_eq!(
            asked[0].subject,
            Subject {
                user: "alice".into(),
                uid: "42".into(),
                groups: vec!["dev".into()],
                extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
            }
        );
        let requested = &asked[0].check;
        assert_eq!(
            (
                requested.group.as_str(),
                requested.resource.as_str(),
                requested.subresource.as_str(),
                requested.namespace.as_str(),
                requested.name.as_str(),
                requested.verb.as_str()
            ),
            ("extensions", "deployments", "scale", "team-a", "web", "get")
        );
        assert_eq!(
            asked[1].subject,
            Subject::service_account("kube-system", "builder")
        );
        assert_eq!(
            asked[1].subject.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system"
            ]
        );
        assert!(asked[1].check.service_account.is_none());
    }

    #[test]
    fn without_a_reviewer_the_expression_fails() {
        let request = request();
        let activation =
            Activation::new().authorizer(request_authorizer(None, &request, None), None);
        let error = Expression::compile("authorizer.path('/x').check('get').allowed()", false)
            .unwrap()
            .evaluate(&activation)
            .unwrap_err();
        assert!(error.contains("no authorizer is configured"), "{error}");
    }
}
