{{/* The chart name, or nameOverride. */}}
{{- define "portcullis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name when it contains the chart name, else RELEASE-portcullis. */}}
{{- define "portcullis.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "portcullis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portcullis.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "portcullis.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "portcullis.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "portcullis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "portcullis.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret with tls.crt and tls.key mounted at /etc/portcullis/tls. */}}
{{- define "portcullis.tlsSecretName" -}}
{{- if eq .Values.tls.mode "existing-secret" }}
{{- required "tls.existingSecret.name is required with tls.mode=existing-secret" .Values.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "portcullis.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Service's DNS names, which the serving certificate must carry. */}}
{{- define "portcullis.dnsNames" -}}
{{- $svc := include "portcullis.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson }}
{{- end }}

{{/* The ConfigMap holding policies, or "" for the built-in set. */}}
{{- define "portcullis.policiesConfigMap" -}}
{{- if .Values.policies.existingConfigMap }}
{{- .Values.policies.existingConfigMap }}
{{- else if .Values.policies.files }}
{{- printf "%s-policies" (include "portcullis.fullname" .) }}
{{- end }}
{{- end }}

{{/* The image reference: a digest wins over a tag. */}}
{{- define "portcullis.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Webhook names as `portcullis webhook-config --name NAME` gives them: validate.portcullis.dev for
the name portcullis, validate.NAME.portcullis.dev otherwise. Call with (list ENDPOINT NAME).
*/}}
{{- define "portcullis.webhookName" -}}
{{- $endpoint := index . 0 }}
{{- $name := index . 1 }}
{{- if eq $name "portcullis" }}
{{- printf "%s.portcullis.dev" $endpoint }}
{{- else }}
{{- printf "%s.%s.portcullis.dev" $endpoint $name }}
{{- end }}
{{- end }}

{{/*
Self-managed TLS: the CA and serving pair, as a dict with caCert, cert and key (PEM). An existing
Secret of this release is reused, so upgrades keep the certificate and the webhooks' caBundle;
otherwise a new CA and serving certificate are generated. Memoised in .Values so that the Secret
and both webhook configurations of one render agree.
*/}}
{{- define "portcullis.selfManagedTLS" -}}
{{- if not (hasKey .Values.tls "_generated") }}
{{- $secretName := include "portcullis.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $pair := dict }}
{{- if and $existing (index $existing "data") (hasKey $existing.data "ca.crt") (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") }}
{{- $_ := set $pair "caCert" (index $existing.data "ca.crt" | b64dec) }}
{{- $_ := set $pair "cert" (index $existing.data "tls.crt" | b64dec) }}
{{- $_ := set $pair "key" (index $existing.data "tls.key" | b64dec) }}
{{- else }}
{{- $days := int .Values.tls.selfManaged.validityDays }}
{{- $ca := genCA (printf "%s-ca" (include "portcullis.fullname" .)) $days }}
{{- $dns := include "portcullis.dnsNames" . | fromJsonArray }}
{{- $cert := genSignedCert (printf "%s.%s.svc" (include "portcullis.fullname" .) .Release.Namespace) nil $dns $days $ca }}
{{- $_ := set $pair "caCert" $ca.Cert }}
{{- $_ := set $pair "cert" $cert.Cert }}
{{- $_ := set $pair "key" $cert.Key }}
{{- end }}
{{- $_ := set .Values.tls "_generated" $pair }}
{{- end }}
{{- toJson .Values.tls._generated }}
{{- end }}

{{/* The webhooks' caBundle (base64 PEM), or "" when cert-manager injects it. */}}
{{- define "portcullis.caBundle" -}}
{{- if eq .Values.tls.mode "self-managed" }}
{{- (include "portcullis.selfManagedTLS" . | fromJson).caCert | b64enc }}
{{- else if eq .Values.tls.mode "existing-secret" }}
{{- required "tls.existingSecret.caBundle (PEM) is required with tls.mode=existing-secret" .Values.tls.existingSecret.caBundle | b64enc }}
{{- end }}
{{- end }}

{{/* Fails the render on values that cannot work. */}}
{{- define "portcullis.validate" -}}
{{- if not (has .Values.tls.mode (list "self-managed" "cert-manager" "existing-secret")) }}
{{- fail (printf "tls.mode must be self-managed, cert-manager or existing-secret, not %q" .Values.tls.mode) }}
{{- end }}
{{- if and (include "portcullis.policiesConfigMap" .) (not .Values.webhooks.generated) }}
{{- fail "policies are given but webhooks.generated is empty: the webhooks' rules must come from the same policies, or requests they match are never sent. Pass --set-file webhooks.generated=<(portcullis webhook-config --policies DIR --service NAMESPACE/NAME)" }}
{{- end }}
{{- range $endpoint := list "validate" "mutate" }}
{{- $webhook := index $.Values.webhooks $endpoint }}
{{- if not (has $webhook.failurePolicy (list "Fail" "Ignore")) }}
{{- fail (printf "webhooks.%s.failurePolicy must be Fail or Ignore, not %q" $endpoint $webhook.failurePolicy) }}
{{- end }}
{{- if or (lt (int $webhook.timeoutSeconds) 1) (gt (int $webhook.timeoutSeconds) 30) }}
{{- fail (printf "webhooks.%s.timeoutSeconds must be 1 to 30, not %v" $endpoint $webhook.timeoutSeconds) }}
{{- end }}
{{- end }}
{{- end }}
