//! Answers from the cluster: a SubjectAccessReview per question, cached for a short while.
//!
//! CEL evaluates synchronously, so [`SubjectAccessReviewer::review`] blocks its thread until
//! the answer comes or the timeout passes. The server runs every request whose policies use
//! `authorizer` on its evaluation threads (`Engine::may_run_long`), never on an async worker; the
//! review itself is spawned onto the runtime and awaited through a channel, which never
//! panics whatever thread waits, and never waits past the timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReview, SubjectAccessReviewSpec,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{AccessQuestion, AccessReviewer};
use crate::expressions::AuthorizationDecision;

/// How long answers are kept, how many, and how long a review may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewSettings {
    /// How long an answer (allowed or not) is reused; errors are never kept.
    pub cache_ttl: Duration,
    /// The most answers kept; the oldest go first.
    pub cache_size: usize,
    /// How long one SubjectAccessReview may take before its check is `errored()`.
    pub timeout: Duration,
}

impl Default for ReviewSettings {
    fn default() -> Self {
        ReviewSettings {
            cache_ttl: Duration::from_secs(5),
            cache_size: 10_000,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Labels of `portcullis_authorizer_reviews_total` and `portcullis_authorizer_cache_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// Reviews: `allowed`, `denied` or `error`; cache look-ups: `hit` or `miss`.
    pub result: &'static str,
}

/// The counters of a [`SubjectAccessReviewer`], registered by
/// [`Metrics`](crate::metrics::Metrics).
#[derive(Clone, Debug, Default)]
pub struct AuthorizerMetrics {
    /// SubjectAccessReviews sent, by result.
    pub reviews: Family<ResultLabels, Counter>,
    /// Cache look-ups, by result.
    pub cache: Family<ResultLabels, Counter>,
}

impl AuthorizerMetrics {
    fn count(family: &Family<ResultLabels, Counter>, result: &'static str) {
        family.get_or_create(&ResultLabels { result }).inc();
    }
}

/// Answers questions with SubjectAccessReviews (`create` on
/// `subjectaccessreviews.authorization.k8s.io`, read-only otherwise), cached on the whole
/// question for [`ReviewSettings::cache_ttl`].
pub struct SubjectAccessReviewer {
    api: kube::Api<SubjectAccessReview>,
    runtime: tokio::runtime::Handle,
    settings: ReviewSettings,
    cache: Mutex<AnswerCache>,
    metrics: AuthorizerMetrics,
}

impl SubjectAccessReviewer {
    /// A reviewer asking the cluster of `client`; reviews run on `runtime`.
    pub fn new(
        client: kube::Client,
        runtime: tokio::runtime::Handle,
        settings: ReviewSettings,
        metrics: AuthorizerMetrics,
    ) -> Self {
        SubjectAccessReviewer {
            api: kube::Api::all(client),
            runtime,
            settings,
            cache: Mutex::new(AnswerCache::default()),
            metrics,
        }
    }

    fn ask(&self, question: &AccessQuestion, deadline: Option<Instant>) -> AuthorizationDecision {
        let timeout = match deadline {
            Some(deadline) => self
                .settings
                .timeout
                .min(deadline.saturating_duration_since(Instant::now())),
            None => self.settings.timeout,
        };
        if timeout.is_zero() {
            return AuthorizationDecision {
                error: "SubjectAccessReview not sent: the request's deadline has passed".into(),
                ..AuthorizationDecision::default()
            };
        }
        let review = review_of(question);
        let api = self.api.clone();
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let answer = tokio::time::timeout(
                timeout,
                api.create(&kube::api::PostParams::default(), &review),
            )
            .await;
            let _ = sender.send(answer);
        });
        // A little longer than the review's own timeout: only a runtime that cannot run the
        // task gets here (shutting down, or waited on by its only worker thread).
        let answer = match receiver.recv_timeout(timeout + Duration::from_millis(100)) {
            Ok(Ok(Ok(review))) => Ok(review),
            Ok(Ok(Err(error))) => Err(error.to_string()),
            Ok(Err(_)) | Err(_) => Err(format!(
                "no answer within {}",
                humantime::format_duration(Duration::from_millis(timeout.as_millis() as u64))
            )),
        };
        match answer {
            Ok(review) => decision_of(&review),
            Err(error) => {
                tracing::warn!(%error, "SubjectAccessReview failed");
                AuthorizationDecision {
                    allowed: false,
                    reason: String::new(),
                    error: format!("SubjectAccessReview failed: {error}"),
                }
            }
        }
    }
}

impl AccessReviewer for SubjectAccessReviewer {
    fn review(&self, question: &AccessQuestion) -> Result<AuthorizationDecision, String> {
        self.review_by(question, None)
    }

    /// Waits at most `--authorizer-timeout`, and never past `deadline`.
    fn review_by(
        &self,
        question: &AccessQuestion,
        deadline: Option<Instant>,
    ) -> Result<AuthorizationDecision, String> {
        let now = Instant::now();
        let cached = self
            .cache
            .lock()
            .ok()
            .and_then(|cache| cache.get(question, now, self.settings.cache_ttl));
        if let Some(decision) = cached {
            AuthorizerMetrics::count(&self.metrics.cache, "hit");
            return Ok(decision);
        }
        AuthorizerMetrics::count(&self.metrics.cache, "miss");
        let decision = self.ask(question, deadline);
        let result = if !decision.error.is_empty() {
            "error"
        } else if decision.allowed {
            "allowed"
        } else {
            "denied"
        };
        AuthorizerMetrics::count(&self.metrics.reviews, result);
        if decision.error.is_empty()
            && let Ok(mut cache) = self.cache.lock()
        {
            cache.insert(
                question.clone(),
                decision.clone(),
                Instant::now(),
                &self.settings,
            );
        }
        Ok(decision)
    }
}

/// The SubjectAccessReview that asks `question`, as the apiserver's own authorizer is asked
/// by `authz.go`: resource checks for API version `*`, selectors as written.
pub fn review_of(question: &AccessQuestion) -> SubjectAccessReview {
    let check = &question.check;
    let subject = &question.subject;
    let text = |value: &str| (!value.is_empty()).then(|| value.to_owned());
    let (resource_attributes, non_resource_attributes) = if check.path.is_empty() {
        let resource = ResourceAttributes {
            group: Some(check.group.clone()),
            version: Some("*".to_owned()),
            resource: Some(check.resource.clone()),
            subresource: text(&check.subresource),
            namespace: text(&check.namespace),
            name: text(&check.name),
            verb: Some(check.verb.clone()),
            field_selector: text(&check.field_selector).map(|raw| FieldSelectorAttributes {
                raw_selector: Some(raw),
                requirements: None,
            }),
            label_selector: text(&check.label_selector).map(|raw| LabelSelectorAttributes {
                raw_selector: Some(raw),
                requirements: None,
            }),
        };
        (Some(resource), None)
    } else {
        let path = NonResourceAttributes {
            path: Some(check.path.clone()),
            verb: Some(check.verb.clone()),
        };
        (None, Some(path))
    };
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: text(&subject.user),
            uid: text(&subject.uid),
            groups: (!subject.groups.is_empty()).then(|| subject.groups.clone()),
            extra: (!subject.extra.is_empty()).then(|| subject.extra.clone()),
            resource_attributes,
            non_resource_attributes,
        },
        ..SubjectAccessReview::default()
    }
}

/// The decision a SubjectAccessReview's status gives: `allowed`, its `reason`, and its
/// `evaluationError` as the error, as the apiserver's authorizer returns them.
pub fn decision_of(review: &SubjectAccessReview) -> AuthorizationDecision {
    let status = review.status.clone().unwrap_or_default();
    AuthorizationDecision {
        allowed: status.allowed,
        reason: status.reason.unwrap_or_default(),
        error: status.evaluation_error.unwrap_or_default(),
    }
}

/// Answers by question, oldest first. Every answer lives as long, so the oldest is also the
/// first to expire: expired and surplus answers leave from the front.
#[derive(Default)]
struct AnswerCache {
    answers: HashMap<AccessQuestion, (Instant, AuthorizationDecision)>,
    order: VecDeque<(Instant, AccessQuestion)>,
}

impl AnswerCache {
    fn get(
        &self,
        question: &AccessQuestion,
        now: Instant,
        ttl: Duration,
    ) -> Option<AuthorizationDecision> {
        let (stored, decision) = self.answers.get(question)?;
        (now.duration_since(*stored) < ttl).then(|| decision.clone())
    }

    fn insert(
        &mut self,
        question: AccessQuestion,
        decision: AuthorizationDecision,
        now: Instant,
        settings: &ReviewSettings,
    ) {
        if settings.cache_size == 0 || settings.cache_ttl.is_zero() {
            return;
        }
        self.answers.insert(question.clone(), (now, decision));
        self.order.push_back((now, question));
        while let Some((stored, _)) = self.order.front() {
            let expired = now.duration_since(*stored) >= settings.cache_ttl;
            if !expired && self.answers.len() <= settings.cache_size {
                break;
            }
            let Some((stored, question)) = self.order.pop_front() else {
                break;
            };
            // A question answered again since is kept under its newer time.
            if self
                .answers
                .get(&question)
                .is_some_and(|(at, _)| *at == stored)
            {
                self.answers.remove(&question);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.answers.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

    use super::*;
    use crate::authorization::Subject;
    use crate::expressions::AuthorizationCheck;

    fn question(verb: &str) -> AccessQuestion {
        AccessQuestion {
            subject: Subject {
                user: "alice".into(),
                uid: "42".into(),
                groups: vec!["dev".into()],
                extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
            },
            check: AuthorizationCheck {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "team-a".into(),
                verb: verb.into(),
                label_selector: "app=web".into(),
                ..AuthorizationCheck::default()
            },
        }
    }

    #[test]
    fn a_resource_question_is_a_review_for_every_version() {
        let review = serde_json::to_value(review_of(&question("update"))).unwrap();
        assert_eq!(
            review["spec"],
            serde_json::json!({
                "user": "alice",
                "uid": "42",
                "groups": ["dev"],
                "extra": {"scopes": ["a"]},
                "resourceAttributes": {
                    "group": "apps",
                    "version": "*",
                    "resource": "deployments",
                    "namespace": "team-a",
                    "verb": "update",
                    "labelSelector": {"rawSelector": "app=web"},
                },
            })
        );
        let mut path = question("get");
        path.check = AuthorizationCheck {
            path: "/healthz".into(),
            verb: "get".into(),
            ..AuthorizationCheck::default()
        };
        let review = serde_json::to_value(review_of(&path)).unwrap();
        assert_eq!(
            review["spec"]["nonResourceAttributes"],
            serde_json::json!({"path": "/healthz", "verb": "get"})
        );
        assert!(review["spec"].get("resourceAttributes").is_none());
    }

    #[test]
    fn the_status_is_the_decision() {
        let review = SubjectAccessReview {
            status: Some(SubjectAccessReviewStatus {
                allowed: false,
                denied: Some(false),
                reason: Some("no RBAC rule".into()),
                evaluation_error: Some("webhook down".into()),
            }),
            ..SubjectAccessReview::default()
        };
        assert_eq!(
            decision_of(&review),
            AuthorizationDecision {
                allowed: false,
                reason: "no RBAC rule".into(),
                error: "webhook down".into(),
            }
        );
    }

    #[test]
    fn answers_expire_and_the_oldest_leave_first() {
        let settings = ReviewSettings {
            cache_ttl: Duration::from_secs(10),
            cache_size: 2,
            timeout: Duration::from_secs(1),
        };
        let allowed = AuthorizationDecision {
            allowed: true,
            ..AuthorizationDecision::default()
        };
        let start = Instant::now();
        let mut cache = AnswerCache::default();
        cache.insert(question("get"), allowed.clone(), start, &settings);
        assert_eq!(
            cache.get(
                &question("get"),
                start + Duration::from_secs(9),
                settings.cache_ttl
            ),
            Some(allowed.clone())
        );
        assert_eq!(
            cache.get(
                &question("get"),
                start + Duration::from_secs(10),
                settings.cache_ttl
            ),
            None
        );
        // Another user, same check: another question.
        let mut bob = question("get");
        bob.subject.user = "bob".into();
        assert_eq!(cache.get(&bob, start, settings.cache_ttl), None);
        let later = start + Duration::from_secs(1);
        cache.insert(question("list"), allowed.clone(), later, &settings);
        cache.insert(question("watch"), allowed.clone(), later, &settings);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&question("get"), later, settings.cache_ttl), None);
        assert!(
            cache
                .get(&question("watch"), later, settings.cache_ttl)
                .is_some()
        );
        // Expired answers go on the next insert.
        let much_later = start + Duration::from_secs(30);
        cache.insert(question("delete"), allowed, much_later, &settings);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.order.len(), 1);
    }

    #[test]
    fn a_silent_cluster_is_an_errored_decision_within_the_timeout() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // A cluster that takes connections and never answers: each review waits out its
        // timeout.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let client = runtime
            .block_on(async { kube::Client::try_from(config) })
            .unwrap();
        let metrics = AuthorizerMetrics::default();
        let settings = ReviewSettings {
            timeout: Duration::from_millis(500),
            ..ReviewSettings::default()
        };
        let reviewer =
            SubjectAccessReviewer::new(client, runtime.handle().clone(), settings, metrics.clone());
        let started = Instant::now();
        for _ in 0..2 {
            let decision = reviewer.review(&question("get")).unwrap();
            assert!(!decision.allowed);
            assert_eq!(
                decision.error,
                "SubjectAccessReview failed: no answer within 500ms"
            );
        }
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(1) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
        // With the request's deadline passed, nothing is sent.
        let started = Instant::now();
        let decision = reviewer
            .review_by(&question("list"), Some(Instant::now()))
            .unwrap();
        assert!(
            decision.error.contains("deadline has passed"),
            "{decision:?}"
        );
        // A deadline nearer than the timeout bounds the wait.
        let soon = Instant::now() + Duration::from_millis(50);
        let decision = reviewer.review_by(&question("watch"), Some(soon)).unwrap();
        assert!(
            decision
                .error
                .starts_with("SubjectAccessReview failed: no answer within"),
            "{decision:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(450),
            "{:?}",
            started.elapsed()
        );
        let count = |family: &Family<ResultLabels, Counter>, result| {
            family.get_or_create(&ResultLabels { result }).get()
        };
        // Errors are not cached: every one asked (the one past its deadline is counted too).
        assert_eq!(count(&metrics.reviews, "error"), 4);
        assert_eq!(count(&metrics.cache, "miss"), 4);
        assert_eq!(count(&metrics.cache, "hit"), 0);
    }
}
