// go-webhook: the Go peer of Portcullis's load benchmark (bench/run.sh). A controller-runtime
// webhook server that applies, by hand, the rules of Portcullis's bench "standard set":
//
//   - Pod Security "restricted:latest" through k8s.io/pod-security-admission's policy package
//     (tests/fixtures/bench/policies/pod-security.yaml: enforce = warn = audit = restricted,
//     so one evaluation serves all three, as upstream's admission plugin does);
//   - the 10 validations and 5 defaults of tests/fixtures/bench/policies/native.yaml;
//   - the 10 CEL validations of bench/fixtures/vap/policy.yaml, written in Go.
//
// It serves POST /validate and POST /mutate over TLS (certificate from -cert-dir) and a plain
// HTTP /readyz on -health-addr. Non-Pod objects are allowed unchanged, as in Portcullis, whose
// rules all match Pods only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

var (
	restricted = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	teamRe     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	ownerRe    = regexp.MustCompile(`@example\.com$`)
	taggedRe   = regexp.MustCompile(`:[^/]+$`)
	maxMemory  = resource.MustParse("4Gi")
	minCPU     = resource.MustParse("10m")
	registries = []string{"registry.example.com", "ghcr.io/example"}
)

// container is one container of any kind: app containers get the probe rule, app and init
// containers the resource rules, all three kinds the image and host-port rules.
type container struct {
	c         *corev1.Container
	app       bool
	ephemeral bool
}

func allContainers(spec *corev1.PodSpec) []container {
	out := make([]container, 0, len(spec.InitContainers)+len(spec.Containers)+len(spec.EphemeralContainers))
	for i := range spec.InitContainers {
		out = append(out, container{&spec.InitContainers[i], false, false})
	}
	for i := range spec.Containers {
		out = append(out, container{&spec.Containers[i], true, false})
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		out = append(out, container{&c, false, true})
	}
	return out
}

// imageParts splits an image reference into repository (with registry), tag and digest.
func imageParts(image string) (repo, tag, digest string) {
	if at := strings.Index(image, "@"); at >= 0 {
		image, digest = image[:at], image[at+1:]
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		image, tag = image[:colon], image[colon+1:]
	}
	return image, tag, digest
}

func withRegistry(repo string) string {
	first, _, found := strings.Cut(repo, "/")
	if !found || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		return "docker.io/" + repo
	}
	return repo
}

func requireMap(kind string, m map[string]string, key string, re *regexp.Regexp) string {
	v, ok := m[key]
	if !ok {
		return fmt.Sprintf("%s %q is required", kind, key)
	}
	if re != nil && !re.MatchString(v) {
		return fmt.Sprintf("%s %q: %q does not match %q", kind, key, v, re.String())
	}
	return ""
}

// nativeViolations: the 10 validations of native.yaml.
func nativeViolations(pod *corev1.Pod) []string {
	var out []string
	add := func(rule, msg string) {
		if msg != "" {
			out = append(out, "[bench-validation/"+rule+"] "+msg)
		}
	}
	add("team", requireMap("label", pod.Labels, "team", teamRe))
	add("version", requireMap("label", pod.Labels, "app.kubernetes.io/version", nil))
	add("owner", requireMap("annotation", pod.Annotations, "example.com/owner", ownerRe))
	spec := &pod.Spec
	containers := allContainers(spec)
	for _, ct := range containers {
		c := ct.c
		repo, tag, digest := imageParts(c.Image)
		full := withRegistry(repo)
		allowed := false
		for _, r := range registries {
			if full == r || strings.HasPrefix(full, r+"/") {
				allowed = true
				break
			}
		}
		if !allowed {
			add("registries", fmt.Sprintf("container %q: image %q is not from an allowed registry", c.Name, c.Image))
		}
		if digest == "" && (tag == "" || tag == "latest") {
			add("pinned", fmt.Sprintf("container %q: image %q uses latest or no tag", c.Name, c.Image))
		}
		if !ct.ephemeral {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					add("requests", fmt.Sprintf("container %q: missing request %s", c.Name, r))
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				add("requests", fmt.Sprintf("container %q: missing limit memory", c.Name))
			}
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && q.Cmp(maxMemory) > 0 {
				add("bounds", fmt.Sprintf("container %q: memory limit %s above 4Gi", c.Name, q.String()))
			}
			if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok && q.Cmp(minCPU) < 0 {
				add("bounds", fmt.Sprintf("container %q: cpu request %s below 10m", c.Name, q.String()))
			}
		}
		if ct.app {
			if c.ReadinessProbe == nil {
				add("probes", fmt.Sprintf("container %q: readiness probe required", c.Name))
			}
			if c.LivenessProbe == nil {
				add("probes", fmt.Sprintf("container %q: liveness probe required", c.Name))
			}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				add("host", fmt.Sprintf("container %q: hostPort %d", c.Name, p.HostPort))
			}
		}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		add("host", "host namespaces are forbidden")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && !(v.HostPath.Path == "/var/log" || strings.HasPrefix(v.HostPath.Path, "/var/log/")) {
			add("host-paths", fmt.Sprintf("volume %q: hostPath %q is not allowed", v.Name, v.HostPath.Path))
		}
	}
	return out
}

// vapViolations: the 10 CEL validations of bench/fixtures/vap/policy.yaml, by hand.
func vapViolations(pod *corev1.Pod) []string {
	var out []string
	fail := func(msg string) { out = append(out, "[bench-vap] "+msg) }
	spec := &pod.Spec
	if _, ok := pod.Labels["app"]; !ok {
		fail("every Pod needs an app label")
	}
	if len(pod.Name) > 63 {
		fail("Pod names are at most 63 characters")
	}
	if len(spec.Containers) > 10 {
		fail("at most 10 containers")
	}
	for _, c := range spec.Containers {
		if !taggedRe.MatchString(c.Image) || strings.HasSuffix(c.Image, ":latest") {
			fail("images are tagged and not :latest")
			break
		}
	}
	for _, c := range spec.Containers {
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			fail("every container has a memory limit")
			break
		}
	}
	for _, c := range spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			fail("privileged containers are forbidden")
			break
		}
	}
	if spec.HostNetwork {
		fail("hostNetwork is forbidden")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			fail("hostPath volumes are forbidden")
			break
		}
	}
	if spec.ServiceAccountName == "default" {
		fail("Pods run as their own service account")
	}
	for _, c := range spec.Containers {
		if len(c.Env) > 50 {
			fail("at most 50 environment variables per container")
			break
		}
	}
	return out
}

type validator struct {
	decoder   admission.Decoder
	evaluator psapolicy.Evaluator
}

func (v *validator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" || req.Object.Raw == nil {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := v.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var violations []string
	result := psapolicy.AggregateCheckResults(v.evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec))
	if !result.Allowed {
		violations = append(violations, fmt.Sprintf("[pod-security/enforce] violates PodSecurity %q: %s", restricted.String(), result.ForbiddenDetail()))
	}
	violations = append(violations, nativeViolations(pod)...)
	violations = append(violations, vapViolations(pod)...)
	var resp admission.Response
	if len(violations) > 0 {
		resp = admission.Denied(strings.Join(violations, "; "))
		if !result.Allowed {
			resp = resp.WithWarnings(fmt.Sprintf("would violate PodSecurity %q: %s", restricted.String(), result.ForbiddenDetail()))
		}
	} else {
		resp = admission.Allowed("")
	}
	resp.AuditAnnotations = map[string]string{"pod-security.kubernetes.io/enforce-policy": restricted.String()}
	if !result.Allowed {
		resp.AuditAnnotations["pod-security.kubernetes.io/audit-violations"] = result.ForbiddenDetail()
	}
	return resp
}

type defaulter struct{ decoder admission.Decoder }

// Handle applies the 5 defaults of native.yaml, where values are missing, on CREATE.
func (d *defaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" || req.Object.Raw == nil || req.Operation != "CREATE" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := d.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	no := false
	yes := true
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		if c.SecurityContext.AllowPrivilegeEscalation == nil {
			c.SecurityContext.AllowPrivilegeEscalation = &no
		}
	}
	if pod.Spec.SecurityContext == nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if pod.Spec.SecurityContext.RunAsNonRoot == nil {
		pod.Spec.SecurityContext.RunAsNonRoot = &yes
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if _, ok := pod.Labels["app.kubernetes.io/managed-by"]; !ok {
		pod.Labels["app.kubernetes.io/managed-by"] = "portcullis"
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if _, ok := pod.Annotations["example.com/checked-by"]; !ok {
		pod.Annotations["example.com/checked-by"] = "portcullis"
	}
	// The usual controller-runtime way: marshal the defaulted object, diff it with the raw one.
	out, err := json.Marshal(pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9443", "HTTPS webhook address")
	healthAddr := flag.String("health-addr", "127.0.0.1:9080", "plain-HTTP /readyz address")
	certDir := flag.String("cert-dir", "", "folder with the serving certificate")
	certName := flag.String("cert-name", "tls.crt", "certificate file in -cert-dir")
	keyName := flag.String("key-name", "tls.key", "key file in -cert-dir")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())

	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-webhook: -listen:", err)
		os.Exit(2)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-webhook: -listen port:", err)
		os.Exit(2)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	decoder := admission.NewDecoder(scheme)
	server := webhook.NewServer(webhook.Options{
		Host: host, Port: port, CertDir: *certDir, CertName: *certName, KeyName: *keyName,
	})
	server.Register("/validate", &admission.Webhook{Handler: &validator{decoder: decoder, evaluator: evaluator}})
	server.Register("/mutate", &admission.Webhook{Handler: &defaulter{decoder: decoder}})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := server.StartedChecker()
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
			if err := started(r); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		if err := http.ListenAndServe(*healthAddr, mux); err != nil {
			fmt.Fprintln(os.Stderr, "go-webhook: health:", err)
			os.Exit(1)
		}
	}()
	if err := server.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "go-webhook:", err)
		os.Exit(1)
	}
}
