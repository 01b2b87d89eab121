use anyhow::Context;

use crate::cli::WebhookConfigArgs;
use crate::webhook_config::{
    WebhookOptions, WebhookTarget, to_yaml_documents, webhook_configurations,
};

/// `portcullis webhook-config`: prints the configurations as multi-document YAML.
pub fn webhook_config(args: WebhookConfigArgs) -> anyhow::Result<()> {
    let engine = super::load_engine(&args.policies)?;
    let target = match (&args.url, &args.service) {
        (Some(url), _) => WebhookTarget::Url(url.clone()),
        (None, Some(service)) => {
            WebhookTarget::parse_service(service).map_err(|e| anyhow::anyhow!("--service: {e}"))?
        }
        (None, None) => anyhow::bail!("one of --url or --service is required"),
    };
    let ca_bundle_pem = match &args.ca_bundle {
        Some(path) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading --ca-bundle {}", path.display()))?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                anyhow::bail!("--ca-bundle {} holds no PEM certificate", path.display());
            }
            Some(pem)
        }
        None => None,
    };
    let options = WebhookOptions {
        target,
        ca_bundle_pem,
        failure_policy: args.failure_policy,
        timeout_seconds: args.timeout_seconds,
        name: args.name,
        own_namespace: args.namespace,
    };
    let mut configurations = webhook_configurations(&engine, &options);
    if configurations.is_empty() {
        anyhow::bail!("the policies act on no resource: there is nothing to register");
    }
    configurations.extend(crate::webhook_config::params_rbac::params_rbac(
        &engine, &options,
    ));
    configurations.extend(crate::webhook_config::inventory_rbac::inventory_rbac(
        &engine, &options,
    ));
    print!("{}", to_yaml_documents(&configurations)?);
    Ok(())
}
