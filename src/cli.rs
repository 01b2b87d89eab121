//! The command line (clap derive). Each flag's doc comment is its `--help` text; every flag
//! can also be set by an environment variable.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::server::OnError;
use crate::telemetry::LogFormat;
use crate::webhook_config::FailurePolicy;

/// Portcullis: a fast Kubernetes admission webhook.
#[derive(Debug, Parser)]
#[command(name = "portcullis", version, about, propagate_version = true)]
pub struct Cli {
    /// Log line format.
    #[arg(long, global = true, env = "PORTCULLIS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (`info`, `debug`, `portcullis=debug,warn` …); RUST_LOG overrides it.
    #[arg(
        long,
        global = true,
        env = "PORTCULLIS_LOG_LEVEL",
        default_value = "info"
    )]
    pub log_level: String,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
// Parsed once per process: the size of `ServeArgs` does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Serve the admission webhook over HTTPS, with health and metrics on a plain-HTTP port.
    Serve(ServeArgs),
    /// Write a CA and a serving certificate (ca.crt, tls.crt, tls.key) for the webhook.
    Certs(CertsArgs),
    /// Print Validating and Mutating webhook configurations for a policy set.
    WebhookConfig(WebhookConfigArgs),
    /// Evaluate manifests or AdmissionReviews offline with the same engine as `serve`.
    Check(CheckArgs),
    /// Run policy test suites: resources with expected decisions and patched results.
    Test(TestArgs),
    /// Scan the objects already in a cluster with the same engine (read-only unless --apply).
    Audit(AuditArgs),
}

fn parse_duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|e| format!("{e} (examples: 500ms, 2s, 1m)"))
}

/// Limits on evaluating CEL expressions (ValidatingAdmissionPolicy, MutatingAdmissionPolicy,
/// native `cel` rules), shared by `serve`, `check` and `test`.
#[derive(Debug, Clone, Copy, Args)]
pub struct CelArgs {
    /// Comprehension iterations one CEL evaluation may perform, nested ones multiplied; past
    /// it the evaluation fails (and the policy's failurePolicy decides). A backstop: the
    /// apiserver's cost limit (1,000,000 per expression) ends evaluations long before.
    #[arg(long, env = "PORTCULLIS_CEL_MAX_ITERATIONS", default_value_t = 100_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub cel_max_iterations: u64,
    /// Time one CEL evaluation may take (CPU time of the evaluating thread on Linux, wall time
    /// elsewhere), checked as runtime cost is charged. A backstop: the cost limit, not the
    /// clock, decides in normal operation.
    #[arg(long, env = "PORTCULLIS_CEL_TIMEOUT", default_value = "1s", value_parser = parse_positive_duration)]
    pub cel_timeout: Duration,
    /// Which evaluator runs CEL: `compiled` (the default: expressions of the common subset
    /// compiled at load, the rest and every evaluation it gives up on interpreted) or
    /// `interpreter` (the interpreter alone, for comparison). Answers are the same.
    #[arg(long, env = "PORTCULLIS_CEL_EVALUATOR", value_enum, default_value_t = CelEvaluator::Compiled)]
    pub cel_evaluator: CelEvaluator,
}

/// `--cel-evaluator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CelEvaluator {
    /// The compiled evaluator, with the interpreter where it does not apply.
    Compiled,
    /// The interpreter only.
    Interpreter,
}

fn parse_positive_duration(value: &str) -> Result<Duration, String> {
    match parse_duration(value)? {
        Duration::ZERO => Err("must be more than zero".to_owned()),
        duration => Ok(duration),
    }
}

/// Limits on evaluating Gatekeeper Rego templates offline (`check`, `test`, `audit`); `serve`
/// stops each evaluation at its request's deadline instead.
#[derive(Debug, Clone, Copy, Args)]
pub struct RegoArgs {
    /// Time one Rego template evaluation (one constraint on one object) may take, wall clock;
    /// past it the evaluation is stopped and fails, as a Rego runtime error does. A backstop
    /// against a template that loops long: `gator` sets none.
    #[arg(long, env = "PORTCULLIS_REGO_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub rego_timeout: Duration,
}

/// Flags of `portcullis serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the HTTPS webhook listener (POST /validate, POST /mutate).
    #[arg(long, env = "PORTCULLIS_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP admin listener (/healthz, /readyz, /metrics).
    #[arg(long, env = "PORTCULLIS_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// PEM certificate chain (leaf first). Needs --tls-key-file.
    #[arg(
        long,
        env = "PORTCULLIS_TLS_CERT_FILE",
        requires = "tls_key_file",
        conflicts_with = "tls_dir"
    )]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of the certificate. Needs --tls-cert-file.
    #[arg(
        long,
        env = "PORTCULLIS_TLS_KEY_FILE",
        requires = "tls_cert_file",
        conflicts_with = "tls_dir"
    )]
    pub tls_key_file: Option<PathBuf>,
    /// Directory holding tls.crt and tls.key, as a mounted kubernetes.io/tls Secret.
    /// Without this and without --tls-cert-file, an ephemeral self-signed certificate for
    /// localhost, 127.0.0.1 and ::1 is made at start.
    #[arg(long, env = "PORTCULLIS_TLS_DIR")]
    pub tls_dir: Option<PathBuf>,
    /// PEM CA bundle: clients must present a certificate it signs (mTLS from the apiserver).
    #[arg(long, env = "PORTCULLIS_CLIENT_CA_FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// Where to write the CA certificate of the ephemeral self-signed certificate
    /// [default: portcullis-ca.crt in the temporary directory].
    #[arg(long, env = "PORTCULLIS_WRITE_CA")]
    pub write_ca: Option<PathBuf>,
    /// How often certificate files are re-checked, besides change notifications.
    #[arg(long, env = "PORTCULLIS_TLS_RELOAD_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,
    /// Policy file or folder (repeatable; comma-separated in the environment variable).
    /// Without it, the built-in policy set.
    #[arg(long = "policies", env = "PORTCULLIS_POLICIES", value_delimiter = ',')]
    pub policies: Vec<PathBuf>,
    /// How often policy files are re-read besides change notifications.
    #[arg(long, env = "PORTCULLIS_POLICY_RELOAD_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub policy_reload_interval: Duration,
    /// Kubeconfig for a read-only watch of Namespaces (their labels feed namespaceSelectors
    /// and Pod Security namespace labels; the whole Namespace is CEL's namespaceObject).
    /// Without it, the in-cluster service account is used when running in a Pod, and no
    /// cluster is used otherwise.
    #[arg(long, env = "PORTCULLIS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Never contact a cluster, even when running in a Pod (namespaces stay unknown).
    #[arg(long, env = "PORTCULLIS_NO_CLUSTER", conflicts_with = "kubeconfig")]
    pub no_cluster: bool,
    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, env = "PORTCULLIS_MAX_BODY_BYTES", default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Bytes of request bodies read and not yet answered, in total. Over HTTP/1.x a body
    /// counts by Content-Length (--max-body-bytes without one) and, when it would pass the
    /// total, waits before it is read until its deadline, then gets 503; over HTTP/2 each
    /// frame counts as it arrives and a stream that would pass the total gets 503 at once.
    #[arg(long, env = "PORTCULLIS_MAX_BUFFERED_BODY_BYTES", default_value_t = crate::server::DEFAULT_MAX_BUFFERED_BODY_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_buffered_body_bytes: usize,
    /// Deadline to read and decide one request; the apiserver's ?timeout= lowers it.
    #[arg(long, env = "PORTCULLIS_REQUEST_TIMEOUT", default_value = "2s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Open webhook connections at most; further ones are closed at accept.
    #[arg(long, env = "PORTCULLIS_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
    /// Time a client gets to complete the TLS handshake.
    #[arg(long, env = "PORTCULLIS_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// Time a client gets to send a request's headers.
    #[arg(long, env = "PORTCULLIS_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// A webhook connection that sends nothing for this long is closed.
    #[arg(long, env = "PORTCULLIS_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    #[arg(long, env = "PORTCULLIS_MAX_CONCURRENT_STREAMS", default_value_t = 256)]
    pub max_concurrent_streams: u32,
    /// Largest request header block in bytes.
    #[arg(long, env = "PORTCULLIS_MAX_HEADER_BYTES", default_value_t = 64 * 1024)]
    pub max_header_bytes: usize,
    /// After SIGTERM, how long the webhook keeps serving (not ready, HTTP/1.x keep-alive
    /// off) before it stops accepting connections. SIGINT skips it.
    #[arg(long, env = "PORTCULLIS_DRAIN_DELAY", default_value = "5s", value_parser = parse_duration)]
    pub drain_delay: Duration,
    /// Time in-flight requests get to finish once the listener stops accepting.
    #[arg(long, env = "PORTCULLIS_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// CEL evaluation limits.
    #[command(flatten)]
    pub cel: CelArgs,
    /// The answer when a request cannot be evaluated (rule panic, deadline passed):
    /// `deny` refuses it with code 500, `allow` admits it with a warning.
    #[arg(long, env = "PORTCULLIS_ON_ERROR", value_enum, default_value_t = OnError::Deny)]
    pub on_error: OnError,
    /// Slots for evaluations of large requests (bodies of 16 KiB and more) on threads apart
    /// from those that accept connections and answer probes; a request takes one per started
    /// 16 KiB of its body (at most all), decodes its objects only once it has them, and waits
    /// for them until its deadline, then gets the `--on-error` answer.
    #[arg(long, env = "PORTCULLIS_MAX_CONCURRENT_EVALUATIONS", default_value_t = crate::server::DEFAULT_MAX_CONCURRENT_EVALUATIONS, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_evaluations: u16,
    /// How long a SubjectAccessReview answer to a CEL `authorizer` check is reused (allowed
    /// or not; errors are never kept); 0s turns the cache off.
    #[arg(long, env = "PORTCULLIS_AUTHORIZER_CACHE_TTL", default_value = "5s", value_parser = parse_duration)]
    pub authorizer_cache_ttl: Duration,
    /// The most SubjectAccessReview answers kept; the oldest go first.
    #[arg(
        long,
        env = "PORTCULLIS_AUTHORIZER_CACHE_SIZE",
        default_value_t = 10_000
    )]
    pub authorizer_cache_size: usize,
    /// How long one SubjectAccessReview may take; a check that gets no answer in time is
    /// `errored()`.
    #[arg(long, env = "PORTCULLIS_AUTHORIZER_TIMEOUT", default_value = "1s", value_parser = parse_duration)]
    pub authorizer_timeout: Duration,
}

/// Flags of `portcullis certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Directory to write ca.crt, tls.crt and tls.key into (created if missing).
    #[arg(long, env = "PORTCULLIS_CERTS_OUT")]
    pub out: PathBuf,
    /// A DNS name or IP address the certificate is for (repeatable).
    #[arg(long = "host", env = "PORTCULLIS_CERTS_HOSTS", value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// A Service as NAMESPACE/NAME: adds NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc and
    /// NAME.NAMESPACE.svc.cluster.local.
    #[arg(long, env = "PORTCULLIS_CERTS_SERVICE")]
    pub service: Option<String>,
    /// Validity in days.
    #[arg(long, env = "PORTCULLIS_CERTS_DAYS", default_value_t = 365)]
    pub days: u32,
    /// Replace files that already exist.
    #[arg(long, env = "PORTCULLIS_CERTS_FORCE")]
    pub force: bool,
}

/// Flags of `portcullis webhook-config`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["url", "service"])))]
pub struct WebhookConfigArgs {
    /// Policy file or folder (repeatable); without it, the built-in rule set.
    #[arg(long = "policies", env = "PORTCULLIS_POLICIES", value_delimiter = ',')]
    pub policies: Vec<PathBuf>,
    /// Base URL the apiserver calls, e.g. https://127.0.0.1:8443 (/validate, /mutate appended).
    #[arg(long, env = "PORTCULLIS_WEBHOOK_URL")]
    pub url: Option<String>,
    /// The in-cluster Service as NAMESPACE/NAME[:PORT] (port 443 by default).
    #[arg(long, env = "PORTCULLIS_WEBHOOK_SERVICE")]
    pub service: Option<String>,
    /// PEM CA bundle that signs the serving certificate (goes into caBundle). Without it,
    /// caBundle is left out for cert-manager's CA injector or a kustomize overlay to fill.
    #[arg(long, env = "PORTCULLIS_CA_BUNDLE")]
    pub ca_bundle: Option<PathBuf>,
    /// What the apiserver does when the webhook cannot answer.
    #[arg(long, env = "PORTCULLIS_FAILURE_POLICY", value_enum, default_value_t = FailurePolicy::Fail)]
    pub failure_policy: FailurePolicy,
    /// Seconds the apiserver waits for an answer (1-30).
    #[arg(long, env = "PORTCULLIS_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u8).range(1..=30))]
    pub timeout_seconds: u8,
    /// Name of both configurations; webhooks are named validate.NAME.portcullis.dev and
    /// mutate.NAME.portcullis.dev (validate.portcullis.dev for the default name).
    #[arg(long, env = "PORTCULLIS_WEBHOOK_NAME", default_value = "portcullis")]
    pub name: String,
    /// Portcullis's own namespace, excluded from admission (with --url; --service implies it).
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = "portcullis")]
    pub namespace: String,
}

/// Output format of `portcullis check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckOutput {
    /// A readable table.
    Text,
    /// A JSON array, one object per input document.
    Json,
}

/// Flags of `portcullis check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Policy file or folder (repeatable); without it, the built-in policy set.
    #[arg(long = "policies", env = "PORTCULLIS_POLICIES", value_delimiter = ',')]
    pub policies: Vec<PathBuf>,
    /// Operation for manifests (AdmissionReviews carry their own).
    #[arg(long, value_enum, default_value_t = CheckOperation::Create)]
    pub operation: CheckOperation,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckOutput::Text)]
    pub output: CheckOutput,
    /// CEL evaluation limits.
    #[command(flatten)]
    pub cel: CelArgs,
    /// Rego evaluation limits.
    #[command(flatten)]
    pub rego: RegoArgs,
    /// Answers to CEL `authorizer` checks: `allow`, `deny`, or a YAML file of rules
    /// (docs/cel.md); without it, expressions that check fail.
    #[arg(long, env = "PORTCULLIS_AUTHORIZER")]
    pub authorizer: Option<String>,
    /// Manifests (multi-document YAML or JSON) or AdmissionReview JSON files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// The operation `check` evaluates manifests as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckOperation {
    /// CREATE: the manifest is `object`.
    #[value(name = "CREATE")]
    Create,
    /// UPDATE: the manifest is both `object` and `oldObject`.
    #[value(name = "UPDATE")]
    Update,
    /// DELETE: the manifest is `oldObject`.
    #[value(name = "DELETE")]
    Delete,
}

/// Flags of `portcullis test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// CEL evaluation limits.
    #[command(flatten)]
    pub cel: CelArgs,
    /// Rego evaluation limits.
    #[command(flatten)]
    pub rego: RegoArgs,
    /// Answers to CEL `authorizer` checks for suites that state none: `allow`, `deny`, or a
    /// YAML file of rules (docs/cel.md).
    #[arg(long, env = "PORTCULLIS_AUTHORIZER")]
    pub authorizer: Option<String>,
    /// gator suites: run every case of a ConstraintTemplate that carries both
    /// `K8sNativeValidation` and `Rego` code through both engines (Gatekeeper runs the CEL
    /// code); a case whose engines give different numbers of violations fails.
    #[arg(long, env = "PORTCULLIS_COMPARE_ENGINES")]
    pub compare_engines: bool,
    /// Test-suite files or folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

/// Output format of `portcullis audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditOutput {
    /// A readable table, one entry per scanned object, and a summary line.
    Table,
    /// `check`'s JSON array, one object per scanned object.
    Json,
    /// OpenReports (openreports.io/v1alpha1) Report and ClusterReport documents as YAML, one
    /// per object with findings.
    Openreports,
}

/// Flags of `portcullis audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Kubeconfig of the cluster to scan. Without it: the in-cluster service account in a
    /// Pod, else $KUBECONFIG or ~/.kube/config.
    #[arg(long, env = "PORTCULLIS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Policy file or folder (repeatable; comma-separated in the environment variable).
    /// Without it, the built-in policy set.
    #[arg(long = "policies", env = "PORTCULLIS_POLICIES", value_delimiter = ',')]
    pub policies: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', env = "PORTCULLIS_AUDIT_OUTPUT", value_enum, default_value_t = AuditOutput::Table)]
    pub output: AuditOutput,
    /// Scan only this namespace (repeatable; comma-separated in the environment variable);
    /// cluster-scoped resources are then left out. Without it, every namespace and
    /// cluster-scoped resources.
    #[arg(
        long = "namespace",
        short = 'n',
        env = "PORTCULLIS_AUDIT_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,
    /// Portcullis's own namespace, excluded from the scan as `webhook-config` excludes it
    /// from admission (its --namespace, or the namespace of its --service).
    #[arg(long, env = "PORTCULLIS_NAMESPACE", default_value = "portcullis")]
    pub webhook_namespace: String,
    /// A namespace excluded besides those `webhook-config` excludes (repeatable;
    /// comma-separated in the environment variable), as the chart's
    /// `webhooks.excludedNamespaces` adds to the webhooks' namespaceSelector.
    #[arg(
        long = "exclude-namespace",
        env = "PORTCULLIS_AUDIT_EXCLUDE_NAMESPACES",
        value_delimiter = ','
    )]
    pub exclude_namespaces: Vec<String>,
    /// The installed webhooks' objectSelector, as JSON (the chart's `webhooks.objectSelector`,
    /// e.g. `{"matchExpressions":[{"key":"audit-skip","operator":"DoesNotExist"}]}`): objects
    /// whose labels it does not select are not judged, as admission would not send them.
    #[arg(long, env = "PORTCULLIS_AUDIT_OBJECT_SELECTOR")]
    pub object_selector: Option<String>,
    /// Objects per list request (the list's `limit`); memory holds at most three pages.
    #[arg(long, env = "PORTCULLIS_AUDIT_PAGE_SIZE", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub page_size: u32,
    /// Threads judging objects, and report writes in flight with --apply [default: the
    /// number of CPUs].
    #[arg(long, env = "PORTCULLIS_AUDIT_CONCURRENCY", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: Option<u16>,
    /// Write the OpenReports reports to the cluster (server-side apply, field manager
    /// portcullis-audit) and delete the reports an earlier scan wrote that this one did not.
    /// Needs the OpenReports CRDs.
    #[arg(long, env = "PORTCULLIS_AUDIT_APPLY")]
    pub apply: bool,
    /// Exit code when some object would be denied (and nothing failed); 0 suits scheduled
    /// scans, whose findings are their output, not a failure.
    #[arg(long, env = "PORTCULLIS_AUDIT_DENIED_EXIT_CODE", default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub denied_exit_code: u8,
    /// CEL evaluation limits.
    #[command(flatten)]
    pub cel: CelArgs,
    /// Rego evaluation limits.
    #[command(flatten)]
    pub rego: RegoArgs,
}
