use std::time::Duration;

use anyhow::Context;

use crate::authorization::ReviewSettings;
use crate::cli::ServeArgs;
use crate::cluster::ClusterSource;
use crate::server::{ConnectionSettings, RequestSettings, ServeConfig, ServeSources, start_with};
use crate::tls::{CertificateSource, LOOPBACK_HOSTS, TlsSettings, generate_certificates};

/// `portcullis serve`: runs until SIGTERM or SIGINT, then drains and returns.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    install_panic_hook();
    let tls = tls_settings(&args)?;
    let cluster = ClusterSource::choose(
        args.kubeconfig.as_deref(),
        args.no_cluster,
        ClusterSource::in_pod(),
    );
    let client = cluster
        .client()
        .await
        .context("connecting to the cluster for the namespace watch")?;
    let server = start_with(
        ServeConfig {
            listen: args.listen,
            admin_listen: args.admin_listen,
            tls,
            tls_reload_interval: args.tls_reload_interval,
            drain_delay: args.drain_delay,
            shutdown_grace: args.shutdown_grace,
            request: RequestSettings {
                max_body_bytes: args.max_body_bytes,
                request_timeout: args.request_timeout,
                on_error: args.on_error,
                max_concurrent_evaluations: usize::from(args.max_concurrent_evaluations),
                max_buffered_body_bytes: args.max_buffered_body_bytes,
            },
            connections: ConnectionSettings {
                max_connections: args.max_connections,
                tls_handshake_timeout: args.tls_handshake_timeout,
                header_read_timeout: args.header_read_timeout,
                max_concurrent_streams: args.max_concurrent_streams,
                max_header_bytes: args.max_header_bytes,
                idle_timeout: args.idle_timeout,
            },
            // Used only without --policies.
            engine: super::load_engine(&[])?,
        },
        ServeSources {
            policy_paths: args.policies.clone(),
            policy_reload_interval: args.policy_reload_interval,
            cluster: client,
            authorizer: ReviewSettings {
                cache_ttl: args.authorizer_cache_ttl,
                cache_size: args.authorizer_cache_size,
                timeout: args.authorizer_timeout,
            },
        },
    )
    .await?;
    let rules = match server.state.engine.load().as_deref() {
        Some(engine) => engine.rule_count().to_string(),
        None => "none: policies not loaded".to_owned(),
    };
    let policies = if args.policies.is_empty() {
        "built-in".to_owned()
    } else {
        format!("{:?}", args.policies)
    };
    let namespaces = match &cluster {
        ClusterSource::None => "none (no cluster)".to_owned(),
        ClusterSource::Kubeconfig(path) => format!("watched via {}", path.display()),
        ClusterSource::InCluster => "watched in-cluster".to_owned(),
    };
    tracing::info!(
        webhook = %server.webhook_addr,
        admin = %server.admin_addr,
        %rules,
        %policies,
        %namespaces,
        "portcullis is serving"
    );
    let drain_delay = match shutdown_signal().await? {
        ShutdownSignal::Terminate => args.drain_delay,
        ShutdownSignal::Interrupt => Duration::ZERO,
    };
    tracing::info!(
        drain_delay = ?drain_delay,
        grace = ?args.shutdown_grace,
        "shutting down: draining"
    );
    server.begin_shutdown_after(drain_delay);
    server.wait().await?;
    tracing::info!("stopped");
    Ok(())
}

fn tls_settings(args: &ServeArgs) -> anyhow::Result<TlsSettings> {
    let source = match (&args.tls_dir, &args.tls_cert_file, &args.tls_key_file) {
        (Some(dir), _, _) => CertificateSource::Directory(dir.clone()),
        (None, Some(cert), Some(key)) => CertificateSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        (None, _, _) => {
            let hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
            let generated = generate_certificates(&hosts, 30)?;
            let ca_path = args
                .write_ca
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("portcullis-ca.crt"));
            std::fs::write(&ca_path, &generated.ca_pem)
                .with_context(|| format!("writing the CA certificate to {}", ca_path.display()))?;
            tracing::info!(
                ca = %ca_path.display(),
                "no certificate given: serving an ephemeral self-signed certificate for \
                 localhost, 127.0.0.1 and ::1; trust it with curl --cacert {}",
                ca_path.display()
            );
            CertificateSource::Generated(generated)
        }
    };
    Ok(TlsSettings {
        source,
        client_ca: args.client_ca_file.clone(),
    })
}

/// What asked the server to stop.
enum ShutdownSignal {
    /// SIGTERM: an orchestrator; drain with the configured delay.
    Terminate,
    /// SIGINT (Ctrl-C): a person at a terminal; no drain delay.
    Interrupt,
}

async fn shutdown_signal() -> anyhow::Result<ShutdownSignal> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = terminate.recv() => Ok(ShutdownSignal::Terminate),
        result = tokio::signal::ctrl_c() => {
            result.context("waiting for SIGINT")?;
            Ok(ShutdownSignal::Interrupt)
        }
    }
}

/// Panic messages can quote data they were handling; log only where a panic happened.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        tracing::error!(%location, "panic");
    }));
}
