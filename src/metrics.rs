//! Prometheus metrics, encoded in the OpenMetrics text format by prometheus-client.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::authorization::{AuthorizerMetrics, ResultLabels};
use crate::cluster::inventory::InventoryMetrics;

/// Labels of `portcullis_admission_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `validate`, `mutate` or `other`.
    pub endpoint: &'static str,
    /// `true`, `false`, or `error` when no AdmissionResponse was sent (HTTP error).
    pub allowed: &'static str,
    /// The response's status code: the AdmissionResponse's (200, 403, 500) or the HTTP one.
    pub code: u16,
}

/// The webhook endpoint a request went to, as the `endpoint` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointLabel {
    /// `/validate`
    Validate,
    /// `/mutate`
    Mutate,
    /// Any other path.
    Other,
}

impl EndpointLabel {
    /// The label value: `validate`, `mutate` or `other`.
    pub fn label(self) -> &'static str {
        match self {
            EndpointLabel::Validate => "validate",
            EndpointLabel::Mutate => "mutate",
            EndpointLabel::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Labels of `portcullis_admission_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    /// `validate`, `mutate` or `other`.
    pub endpoint: &'static str,
}

/// Labels of `portcullis_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `tls` or `policies`.
    pub component: &'static str,
    /// `success` or `failure`.
    pub result: &'static str,
}

/// Labels of `portcullis_policy_evaluations_total`: every value comes from a policy document
/// or is one of a few fixed words, never from an object.
#[derive(Clone, Debug, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    /// The policy's name.
    pub policy: Arc<str>,
    /// The binding's name (empty for native policies).
    pub binding: Option<Arc<str>>,
    /// `ValidatingAdmissionPolicy`, `MutatingAdmissionPolicy` or `Policy`.
    pub kind: &'static str,
    /// `Deny`, `Warn`, `Audit` or `Mutate`.
    pub action: &'static str,
    /// `pass`, `fail` or `error`.
    pub result: &'static str,
}

impl std::hash::Hash for PolicyLabels {
    /// The names, and of each fixed word its length and first letter (which tell the words of
    /// each label apart): cheaper than hashing the words, and equal labels hash alike.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.policy.as_bytes());
        if let Some(binding) = &self.binding {
            state.write(binding.as_bytes());
        }
        let word = |word: &str| {
            (word.len() as u64) << 8 | u64::from(word.as_bytes().first().copied().unwrap_or(0))
        };
        state.write_u64(word(self.kind) << 32 | word(self.action) << 16 | word(self.result));
    }
}

/// Labels of `portcullis_policy_evaluation_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyNameLabels {
    /// The policy's name.
    pub policy: Arc<str>,
}

/// Buckets from 50 µs to 10 s: most admissions take well under a millisecond.
const DURATION_BUCKETS: [f64; 17] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 10.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Buckets from 1 µs to 1 s: one policy usually takes microseconds.
const POLICY_BUCKETS: [f64; 13] = [
    0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.001, 0.01, 0.1,
    0.25, 1.0,
];

fn policy_histogram() -> Histogram {
    Histogram::new(POLICY_BUCKETS)
}

/// A cheap hash for label sets taken from the loaded policies (FxHash's rotate, xor and
/// multiply per word). Their values come from policy documents and fixed words, never from a
/// request, so no client can choose keys that collide; the Families' SipHash, which guards
/// against that, cost about 400 instructions per lookup.
#[derive(Default, Clone, Copy)]
struct PolicyLabelHasher(u64);

impl PolicyLabelHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for PolicyLabelHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buffer = [0; 8];
            buffer.copy_from_slice(word);
            self.add(u64::from_le_bytes(buffer));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let word = rest
                .iter()
                .rev()
                .fold(0, |word, &byte| (word << 8) | u64::from(byte));
            self.add(word);
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type PolicyLabelMap<K, V> = HashMap<K, V, BuildHasherDefault<PolicyLabelHasher>>;

/// The per-policy metrics a request records, as their Families hold them (a clone shares the
/// Family's value), found with [`PolicyLabelHasher`]: a request records one evaluation, and
/// for admission policies and constraints one duration, for every policy it ran.
#[derive(Default)]
struct PolicyMetricsCache {
    evaluations: RwLock<PolicyLabelMap<PolicyLabels, Counter>>,
    durations: RwLock<PolicyLabelMap<Arc<str>, Histogram>>,
}

/// Records each `(key, value)` on the metric `cache` holds for the key, which `create` gives
/// (and the cache keeps) on first use: one read lock for the request, a write lock only for
/// keys not seen before.
fn record_each<K, V, M>(
    cache: &RwLock<PolicyLabelMap<K, M>>,
    items: impl Iterator<Item = (K, V)>,
    create: impl Fn(&K) -> M,
    record: impl Fn(&M, V),
) where
    K: std::hash::Hash + Eq,
{
    let mut missing = Vec::new();
    {
        let found = cache.read().unwrap_or_else(|e| e.into_inner());
        for (key, value) in items {
            match found.get(&key) {
                Some(metric) => record(metric, value),
                None => missing.push((key, value)),
            }
        }
    }
    if missing.is_empty() {
        return;
    }
    let mut found = cache.write().unwrap_or_else(|e| e.into_inner());
    for (key, value) in missing {
        let metric = found.entry(key).or_insert_with_key(&create);
        record(metric, value);
    }
}

/// Every metric Portcullis exports, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// Admission requests answered.
    pub requests: Family<RequestLabels, Counter>,
    /// Time from request start to response, by endpoint.
    pub duration: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    /// Requests being handled now.
    pub in_flight: Gauge,
    /// NotAfter of the serving certificate, in Unix seconds.
    pub certificate_expiry: Gauge,
    /// Reload attempts, by component and result.
    pub reloads: Family<ReloadLabels, Counter>,
    /// Panics caught while handling requests.
    pub panics: Counter,
    /// Connections closed at accept because `--max-connections` were open.
    pub connections_rejected: Counter,
    /// Requests waiting for an evaluation slot now.
    pub evaluations_waiting: Gauge,
    /// Bytes of `--max-buffered-body-bytes` that request bodies hold now.
    pub buffered_body_bytes: Gauge,
    /// Time requests waited for an evaluation slot.
    pub evaluation_wait: Histogram,
    /// Policy evaluations, by policy, binding, kind, action and result.
    pub policy_evaluations: Family<PolicyLabels, Counter>,
    /// Time each policy that matched took, by policy.
    pub policy_duration: Family<PolicyNameLabels, Histogram, fn() -> Histogram>,
    /// Type-checking warnings of each loaded ValidatingAdmissionPolicy.
    pub type_checking_warnings: Family<PolicyNameLabels, Gauge>,
    /// SubjectAccessReviews for CEL `authorizer` checks and their cache.
    pub authorizer: AuthorizerMetrics,
    /// Reads of namespaces the namespace watch did not hold yet, by result.
    pub namespace_reads: Family<ResultLabels, Counter>,
    /// Reads of policy parameters their watch did not hold yet, by result.
    pub param_reads: Family<ResultLabels, Counter>,
    /// The Gatekeeper inventory's watches.
    pub inventory: InventoryMetrics,
    /// Per endpoint, the series of `requests` for an admission allowed with code 200 and of
    /// `duration`, once first used: most requests count there, and a handle skips the
    /// family's lock and label hashing. Created on first use, as `get_or_create` would, so
    /// `/metrics` shows the same series.
    admitted: [OnceLock<Counter>; 3],
    durations: [OnceLock<Histogram>; 3],
    policy_metrics: PolicyMetricsCache,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let duration = Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram,
        );
        let in_flight = Gauge::default();
        let certificate_expiry = Gauge::default();
        let reloads = Family::<ReloadLabels, Counter>::default();
        let panics = Counter::default();
        let connections_rejected = Counter::default();
        let evaluations_waiting = Gauge::default();
        let buffered_body_bytes = Gauge::default();
        let evaluation_wait = duration_histogram();
        let policy_evaluations = Family::<PolicyLabels, Counter>::default();
        let policy_duration =
            Family::<PolicyNameLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                policy_histogram,
            );
        let type_checking_warnings = Family::<PolicyNameLabels, Gauge>::default();
        registry.register(
            "portcullis_policy_type_checking_warnings",
            "Expressions of each loaded ValidatingAdmissionPolicy that do not type-check against \
             the schemas of the kinds it matches (the apiserver's status.typeChecking)",
            type_checking_warnings.clone(),
        );
        registry.register(
            "portcullis_admission_requests",
            "Admission requests answered, by endpoint, decision and code",
            requests.clone(),
        );
        registry.register(
            "portcullis_admission_duration_seconds",
            "Time to answer an admission request",
            duration.clone(),
        );
        registry.register(
            "portcullis_admission_in_flight",
            "Admission requests being handled",
            in_flight.clone(),
        );
        registry.register(
            "portcullis_tls_certificate_expiry_timestamp_seconds",
            "NotAfter of the serving certificate in use, as a Unix timestamp",
            certificate_expiry.clone(),
        );
        registry.register(
            "portcullis_reloads",
            "Reloads of certificates and policies, by component and result",
            reloads.clone(),
        );
        registry.register(
            "portcullis_panics",
            "Panics caught while handling requests",
            panics.clone(),
        );
        registry.register(
            "portcullis_connections_rejected",
            "Connections closed at accept because the connection limit was reached",
            connections_rejected.clone(),
        );
        registry.register(
            "portcullis_evaluations_waiting",
            "Admission requests waiting for an evaluation slot",
            evaluations_waiting.clone(),
        );
        registry.register(
            "portcullis_buffered_body_bytes",
            "Bytes of the buffered-body budget that request bodies hold",
            buffered_body_bytes.clone(),
        );
        registry.register(
            "portcullis_evaluation_wait_seconds",
            "Time admission requests waited for an evaluation slot",
            evaluation_wait.clone(),
        );
        registry.register(
            "portcullis_policy_evaluations",
            "Policy evaluations by policy, binding, kind, action and result (fail under Warn or \
             Audit is a would-be denial)",
            policy_evaluations.clone(),
        );
        registry.register(
            "portcullis_policy_evaluation_duration_seconds",
            "Time each policy that matched a request (an admission policy: its constraints and a \
             binding) took to evaluate",
            policy_duration.clone(),
        );
        let namespace_reads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "portcullis_namespace_reads",
            "Reads of a namespace the namespace watch did not hold yet, before deciding a \
             request in it, by result (found, not_found, error, timeout)",
            namespace_reads.clone(),
        );
        let param_reads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "portcullis_param_reads",
            "Reads of a policy parameter object (a paramRef by name) its watch did not hold \
             yet, before deciding a request, by result (found, not_found, error, timeout)",
            param_reads.clone(),
        );
        let inventory = InventoryMetrics::default();
        registry.register(
            "portcullis_inventory_objects",
            "Objects of each kind Gatekeeper's Config syncs that the watches keeping \
             data.inventory hold (namespaces excluded from sync left out)",
            inventory.objects.clone(),
        );
        registry.register(
            "portcullis_inventory_watch_errors",
            "Errors of the watch of each kind Gatekeeper's Config syncs (each retried with \
             backoff)",
            inventory.watch_errors.clone(),
        );
        let authorizer = AuthorizerMetrics::default();
        registry.register(
            "portcullis_authorizer_reviews",
            "SubjectAccessReviews sent for CEL authorizer checks, by result (allowed, denied, \
             error)",
            authorizer.reviews.clone(),
        );
        registry.register(
            "portcullis_authorizer_cache",
            "Look-ups of CEL authorizer answers in the cache, by result (hit, miss)",
            authorizer.cache.clone(),
        );
        Metrics {
            registry,
            authorizer,
            namespace_reads,
            param_reads,
            inventory,
            type_checking_warnings,
            policy_evaluations,
            policy_duration,
            connections_rejected,
            evaluations_waiting,
            buffered_body_bytes,
            evaluation_wait,
            requests,
            duration,
            in_flight,
            certificate_expiry,
            reloads,
            panics,
            admitted: Default::default(),
            durations: Default::default(),
            policy_metrics: PolicyMetricsCache::default(),
        }
    }

    /// Counts one answered webhook request.
    pub fn record_request(&self, endpoint: EndpointLabel, allowed: &'static str, code: u16) {
        let labels = RequestLabels {
            endpoint: endpoint.label(),
            allowed,
            code,
        };
        if allowed == "true" && code == 200 {
            self.admitted[endpoint.index()]
                .get_or_init(|| self.requests.get_or_create(&labels).clone())
                .inc();
        } else {
            self.requests.get_or_create(&labels).inc();
        }
    }

    /// Records how long one webhook request took.
    pub fn record_duration(&self, endpoint: EndpointLabel, took: Duration) {
        self.durations[endpoint.index()]
            .get_or_init(|| {
                self.duration
                    .get_or_create(&EndpointLabels {
                        endpoint: endpoint.label(),
                    })
                    .clone()
            })
            .observe(took.as_secs_f64());
    }

    /// Records what the policies of one request gave and how long each took.
    pub fn record_policies(&self, decision: &crate::engine::Decision) {
        let cache = &self.policy_metrics;
        let labels = decision.outcomes.iter().map(|outcome| {
            let labels = PolicyLabels {
                policy: outcome.policy.clone(),
                binding: outcome.binding.clone(),
                kind: outcome.kind,
                action: outcome.action,
                result: outcome.result,
            };
            (labels, ())
        });
        record_each(
            &cache.evaluations,
            labels,
            |labels| self.policy_evaluations.get_or_create(labels).clone(),
            |counter, ()| {
                counter.inc();
            },
        );
        let timings = decision
            .timings
            .iter()
            .map(|(policy, took)| (policy.clone(), took.as_secs_f64()));
        record_each(
            &cache.durations,
            timings,
            |policy| {
                let labels = PolicyNameLabels {
                    policy: policy.clone(),
                };
                self.policy_duration.get_or_create(&labels).clone()
            },
            Histogram::observe,
        );
    }

    /// Replaces the type-checking warning counts with those of the policy set now loaded.
    pub fn record_type_checking(
        &self,
        warnings: &std::collections::BTreeMap<String, Vec<crate::engine::ExpressionWarning>>,
    ) {
        self.type_checking_warnings.clear();
        for (policy, list) in warnings {
            self.type_checking_warnings
                .get_or_create(&PolicyNameLabels {
                    policy: policy.as_str().into(),
                })
                .set(i64::try_from(list.len()).unwrap_or(i64::MAX));
        }
    }

    /// Counts one reload attempt.
    pub fn record_reload(&self, component: &'static str, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.reloads
            .get_or_create(&ReloadLabels { component, result })
            .inc();
    }

    /// Encodes every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use std::sync::Arc;
    use std::time::Duration;

    use super::{Metrics, PolicyLabelHasher};
    use crate::engine::{Decision, ExpressionWarning, PolicyOutcome};

    fn warning() -> ExpressionWarning {
        ExpressionWarning {
            field_ref: "spec.validations[0].expression".to_owned(),
            warning: "apps/v1, Kind=Deployment: ERROR: …".to_owned(),
        }
    }

    #[test]
    fn type_checking_warnings_follow_the_loaded_set() {
        let metrics = Metrics::new();
        let mut loaded = BTreeMap::new();
        loaded.insert("typo".to_owned(), vec![warning(), warning()]);
        loaded.insert("clean".to_owned(), Vec::new());
        metrics.record_type_checking(&loaded);
        let text = metrics.encode();
        assert!(
            text.contains("portcullis_policy_type_checking_warnings{policy=\"typo\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("portcullis_policy_type_checking_warnings{policy=\"clean\"} 0"),
            "{text}"
        );
        // A reload replaces the set: a policy that is gone has no series any more.
        loaded.remove("typo");
        metrics.record_type_checking(&loaded);
        let text = metrics.encode();
        assert!(!text.contains("policy=\"typo\""), "{text}");
    }

    fn outcome(policy: &str, binding: Option<&str>, result: &'static str) -> PolicyOutcome {
        PolicyOutcome {
            kind: "ValidatingAdmissionPolicy",
            policy: policy.into(),
            binding: binding.map(Arc::from),
            action: "Deny",
            result,
        }
    }

    fn count(text: &str, series: &str) -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn per_policy_series_count_every_request_once_cached() {
        let metrics = Metrics::new();
        let decision = |result| Decision {
            outcomes: vec![
                outcome("a", Some("a-binding"), result),
                outcome("b", None, "pass"),
            ],
            timings: vec![("a".into(), Duration::from_micros(20))],
            ..Decision::default()
        };
        for _ in 0..3 {
            metrics.record_policies(&decision("pass"));
        }
        metrics.record_policies(&decision("fail"));
        let text = metrics.encode();
        let series = |policy: &str, binding: &str, result: &str| {
            format!(
                "portcullis_policy_evaluations_total{{policy=\"{policy}\",binding=\"{binding}\",\
                 kind=\"ValidatingAdmissionPolicy\",action=\"Deny\",result=\"{result}\"}}"
            )
        };
        assert_eq!(
            count(&text, &series("a", "a-binding", "pass")),
            Some(3),
            "{text}"
        );
        assert_eq!(
            count(&text, &series("a", "a-binding", "fail")),
            Some(1),
            "{text}"
        );
        assert_eq!(count(&text, &series("b", "", "pass")), Some(4), "{text}");
        assert_eq!(
            count(
                &text,
                "portcullis_policy_evaluation_duration_seconds_count{policy=\"a\"}"
            ),
            Some(4),
            "{text}"
        );
    }

    #[test]
    fn the_label_hash_reads_every_byte() {
        use std::hash::Hasher;
        let hash = |bytes: &[u8]| {
            let mut hasher = PolicyLabelHasher::default();
            hasher.write(bytes);
            hasher.finish()
        };
        let name = b"a-policy-name-longer-than-a-word";
        let mut seen = std::collections::HashSet::new();
        for length in 0..=name.len() {
            assert!(seen.insert(hash(&name[..length])), "length {length}");
        }
        assert_ne!(hash(b"policy-a"), hash(b"policy-b"));
        assert_ne!(hash(b"policy-a1"), hash(b"policy-a2"));
    }
}
