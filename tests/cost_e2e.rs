//! Differential test of the CEL runtime cost limit: the apiserver cancels an expression whose
//! cel-go cost passes 1 000 000 (`operation cancelled: actual cost limit exceeded`), whatever
//! the machine's load; Portcullis charges the same units and must cancel the same objects.
//!
//! For each expression shape below (nested comprehensions of each macro, presence tests,
//! literals built per item, calls charged by their operands' sizes: string equality and
//! ordering, `startsWith`, `contains`, `matches`, `+`, `in` a list built per item, and the
//! Kubernetes library's `lowerAscii`, `split`, `replace`, `indexOf`, `isSorted`, `quantity`,
//! `url`), the test finds the largest Pod (in containers) that Portcullis's cost model admits,
//! then asks the real apiserver (`PORTCULLIS_E2E_BIN`) and `portcullis check` about Pods with
//! one container fewer, that many, and one more, each judged by a ValidatingAdmissionPolicy
//! holding the expression. Both must admit and cancel the same Pods: a unit wrong anywhere in
//! the shape moves the apiserver's boundary off Portcullis's.
//!
//! The library's other sized calls (`join`, `find`, `findAll`, conversions, `strings.quote`,
//! `format`, `containsIP`, `containsCIDR`, `ip.isCanonical`, `validate`, selectors) and the
//! operators between `dyn` operands are checked to the unit: [`EXACT_CASES`].

mod common;

use std::process::Command;
use std::time::Duration;

use std::sync::Arc;

use common::control_plane::{ControlPlane, e2e_bin, eventually, stderr};
use portcullis::expressions::{
    Activation, AuthorizationCheck, AuthorizationDecision, Authorizer, CelEnvironment, CelLimits,
};
use serde_json::{Value, json};

/// Each case: a name (also the Pods' `cost-case` label) and a validation expression.
const CASES: &[(&str, &str)] = &[
    (
        "triple-all",
        "object.spec.containers.all(c, object.spec.containers.all(d, \
         object.spec.containers.all(e, c.name != 'zzz' && d.name != 'zzz')))",
    ),
    (
        "triple-exists",
        "!object.spec.containers.exists(c, object.spec.containers.exists(d, \
         object.spec.containers.exists(e, e.name == 'zzz')))",
    ),
    (
        "has-and-index",
        "object.spec.containers.all(c, object.spec.containers.all(d, \
         object.spec.containers.all(e, has(e.image) && object.spec.containers[0].name != '')))",
    ),
    (
        "map-filter",
        "object.spec.containers.map(c, object.spec.containers.filter(d, \
         object.spec.containers.exists(e, e.name == d.name) && d.name == c.name)).size() >= 0",
    ),
    (
        "exists-one-lists",
        "object.spec.containers.all(c, object.spec.containers.exists_one(d, \
         [d.name, d.name].size() == 2 && {'k': d.name}.size() == 1 && d.name == c.name))",
    ),
    (
        "string-sizes",
        "object.spec.containers.all(c, object.spec.containers.all(d, \
         object.spec.containers.all(e, e.image == d.image && e.image.startsWith('registry') \
         && e.image.contains('example'))))",
    ),
    (
        "regex-concat-in",
        "object.spec.containers.all(c, object.spec.containers.all(d, \
         c.image.matches('^registry[.]example') && c.name + d.name != '' \
         && d.name in [c.name, d.name] && c.image > d.name))",
    ),
    (
        "library-sizes",
        "object.spec.containers.all(c, object.spec.containers.all(d, \
         c.image.lowerAscii().split('/').size() == 2 && c.image.replace('registry', 'r') != d.name \
         && c.image.indexOf('example') > 0 && [c.image, d.image].isSorted() \
         && quantity('100Mi').isGreaterThan(quantity('1')) \
         && url('https://' + c.image).getHost() != ''))",
    ),
];

const LIMIT_EXCEEDED: &str = "actual cost limit exceeded";

fn pod(case: &str, containers: usize) -> Value {
    let containers: Vec<Value> = (0..containers)
        .map(|i| json!({"name": format!("c{i}"), "image": "registry.example.com/app:1.0"}))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{case}-{}", containers.len()),
            "namespace": "default",
            "labels": {"cost-case": case},
        },
        "spec": {"containers": containers},
    })
}

/// The largest number of containers whose Pod Portcullis evaluates within the cost limit.
fn portcullis_boundary(expression: &str) -> usize {
    let env = CelEnvironment::kubernetes().limits(CelLimits {
        max_eval_time: Duration::from_secs(120),
        ..CelLimits::default()
    });
    let program = env.compile(expression).unwrap();
    let within = |n: usize| {
        let object = pod("probe", n);
        program.evaluate(&Activation::new().object(&object)).is_ok()
    };
    assert!(
        within(1),
        "{expression}: one container must be within the limit"
    );
    let (mut low, mut high) = (1, 2);
    while within(high) {
        low = high;
        high *= 2;
        assert!(high < 100_000, "{expression}: never reaches the limit");
    }
    while high - low > 1 {
        let middle = (low + high) / 2;
        if within(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    low
}

fn policies_yaml() -> String {
    let sentinel = [("sentinel", "false")];
    CASES
        .iter()
        .copied()
        .chain(sentinel)
        .map(|(name, expression)| {
            pod_policy_yaml(
                &format!("cost-{name}"),
                name,
                &format!(
                    "  validations:\n    - expression: {expression:?}\n      message: denied by {name}\n"
                ),
            )
        })
        .collect()
}

/// The `matchConstraints` of a policy for Pods created with the label `cost-case: <case>`.
fn cost_case_match(case: &str) -> String {
    format!(
        "  matchConstraints:
    objectSelector:
      matchLabels:
        cost-case: {case}
    resourceRules:
      - apiGroups: [\"\"]
        apiVersions: [v1]
        operations: [CREATE]
        resources: [pods]
"
    )
}

/// A ValidatingAdmissionPolicy `name` with `spec` (indented under `spec:`) for Pods created
/// with the label `cost-case: <case>`, and its Deny binding.
fn pod_policy_yaml(name: &str, case: &str, spec: &str) -> String {
    let match_constraints = cost_case_match(case);
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
{match_constraints}{spec}---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
  validationActions: [Deny]
---
"
    )
}

/// The apiserver's answer: `Ok(())` when admitted, else kubectl's error.
fn apiserver_answer(cluster: &ControlPlane, object: &Value) -> Result<(), String> {
    let output = cluster.kubectl_stdin(
        &["create", "--dry-run=server", "-f", "-"],
        &serde_json::to_string(object).unwrap(),
    );
    if output.status.success() {
        Ok(())
    } else {
        Err(stderr(&output))
    }
}

#[test]
fn the_cost_limit_cancels_the_same_objects_as_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let work = tempfile::tempdir().unwrap();
    let policies = work.path().join("policies.yaml");
    std::fs::write(&policies, policies_yaml()).unwrap();

    let mut probes = Vec::new();
    for (case, expression) in CASES {
        let boundary = portcullis_boundary(expression);
        for n in [boundary - 1, boundary, boundary + 1] {
            probes.push((*case, n, pod(case, n)));
        }
    }

    // Portcullis: one `check` over every Pod.
    let mut files = Vec::new();
    for (case, n, object) in &probes {
        let file = work.path().join(format!("{case}-{n}.json"));
        std::fs::write(&file, serde_json::to_vec(object).unwrap()).unwrap();
        files.push(file);
    }
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        // A debug build is slow: the wall-clock backstop must not decide.
        .args([
            "check",
            "--cel-timeout",
            "10m",
            "--output",
            "json",
            "--policies",
        ])
        .arg(&policies)
        .args(&files)
        .output()
        .unwrap();
    let checked: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check output: {e}: {}", stderr(&output)));
    assert_eq!(checked.len(), probes.len());

    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["apply", "-f", policies.to_str().unwrap()]);
    // The policies are in force once the sentinel (`false`) denies.
    eventually(
        "the policies to be in force",
        Duration::from_secs(60),
        || match apiserver_answer(&cluster, &pod("sentinel", 1)) {
            Err(error) if error.contains("denied by sentinel") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );

    let mut differences = Vec::new();
    for ((case, n, object), portcullis) in probes.iter().zip(&checked) {
        let apiserver = apiserver_answer(&cluster, object);
        let allowed = portcullis["allowed"].as_bool().unwrap();
        let portcullis_message = portcullis["violations"].to_string();
        let agree = match &apiserver {
            Ok(()) => allowed,
            Err(error) => {
                !allowed
                    && error.contains(LIMIT_EXCEEDED)
                    && portcullis_message.contains(LIMIT_EXCEEDED)
            }
        };
        eprintln!(
            "{case} with {n} containers: apiserver {}, Portcullis {}",
            if apiserver.is_ok() {
                "admits"
            } else {
                "denies"
            },
            if allowed { "admits" } else { "denies" },
        );
        if !agree {
            differences.push(format!(
                "{case} with {n} containers: apiserver {apiserver:?}, Portcullis {portcullis}"
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
    // Each shape reaches the limit within the probes: one admitted, one cancelled.
    for (case, _) in CASES {
        let outcomes: Vec<bool> = probes
            .iter()
            .zip(&checked)
            .filter(|((c, _, _), _)| c == case)
            .map(|(_, checked)| checked["allowed"].as_bool().unwrap())
            .collect();
        assert_eq!(outcomes, [true, true, false], "{case}");
    }
}

/// The Kubernetes library's calls charged by their operands' sizes, each case measured to
/// the unit: `object.spec.containers.all(c, <body>)`, on long operands from the Pod's
/// annotations ([`library_pod`]), then `pad == pad` on an annotation of `L` characters, which
/// costs `L / 10` rounded up. Portcullis picks the containers and `L` so that the expression
/// costs exactly 1,000,000 units (the limit: admitted); `L - 10` costs 999,999 (admitted) and
/// `L + 1` 1,000,001 (cancelled). The apiserver gives the same three answers only if it
/// charges the body exactly as Portcullis does.
const EXACT_CASES: &[(&str, &str)] = &[
    (
        "exact-join",
        "[object.metadata.annotations.text, c.name].join('/') != '' \
         && [c.name, c.image].join() != ''",
    ),
    (
        "exact-find",
        "object.metadata.annotations.text.find('[a-z]+') != '' \
         && object.metadata.annotations.text.findAll('[^a]+a', 1).size() == 1",
    ),
    (
        "exact-conversions",
        "string(bytes(object.metadata.annotations.text)) == object.metadata.annotations.text \
         && bytes(object.metadata.annotations.text + '').size() > 0 \
         && bytes(object.metadata.annotations.text).size() > 0 \
         && bytes(c.name).size() > 0 && string(c.name) == c.name",
    ),
    (
        "exact-quote-format",
        "strings.quote(object.metadata.annotations.text).size() > 0 \
         && object.metadata.annotations.text.format([]) != '' \
         && '%s:%s'.format([c.name, c.image]) != ''",
    ),
    (
        "exact-operators",
        "object.metadata.annotations.text + object.metadata.annotations.text != '' \
         && object.metadata.annotations.text >= object.metadata.annotations.medium \
         && c in object.spec.containers \
         && object.metadata.annotations.text + '' >= object.metadata.annotations.text \
         && c.name in object.metadata.annotations.ips.split(',') + [c.name]",
    ),
    (
        "exact-net",
        "object.metadata.annotations.ips.split(',').all(s, \
         cidr('2001:db8::/32').containsIP(s) && cidr('2001:db8::/32').containsIP(ip(s)) \
         && cidr('2001:db8::/32').containsCIDR(s + '/128') \
         && cidr('2001:db8::/32').containsCIDR(cidr(s + '/128')) \
         && cidr('::/0').containsIP(s) && cidr('10.0.0.0/8').containsIP('10.1.2.3') \
         && ip.isCanonical(s)) \
         && cidr('2001:db8::/32').containsIP(object.metadata.annotations.ip) \
         && cidr('2001:db8::/32').containsCIDR(object.metadata.annotations.cidr) \
         && cidr('2001:db8::/32').containsCIDR(object.metadata.annotations.cidr + '')",
    ),
    (
        "exact-validate",
        "[format.dns1123Label().validate(object.metadata.annotations.medium), \
         format.dns1123Subdomain().validate(object.metadata.annotations.medium), \
         format.dns1035Label().validate(object.metadata.annotations.medium), \
         format.qualifiedName().validate(object.metadata.annotations.medium), \
         format.dns1123LabelPrefix().validate(object.metadata.annotations.medium), \
         format.dns1123SubdomainPrefix().validate(object.metadata.annotations.medium), \
         format.dns1035LabelPrefix().validate(object.metadata.annotations.medium), \
         format.labelValue().validate(object.metadata.annotations.medium), \
         format.uri().validate(object.metadata.annotations.medium), \
         format.uuid().validate(object.metadata.annotations.medium), \
         format.byte().validate(object.metadata.annotations.medium), \
         format.date().validate(object.metadata.annotations.medium), \
         format.datetime().validate(object.metadata.annotations.medium), \
         format.named('uri').value().validate(c.image)].size() == 14",
    ),
    (
        "exact-lists-sets",
        "sets.contains(object.metadata.annotations.ips.split(',').slice(0, 40), [c.name]) == false \
         && !sets.intersects(object.metadata.annotations.ips.split(',').slice(0, 40), [c.name, c.image]) \
         && sets.equivalent(object.metadata.annotations.ips.split(',').slice(0, 40), \
         object.metadata.annotations.ips.split(',').slice(0, 40).reverse()) \
         && object.metadata.annotations.ips.split(',').slice(0, 40).distinct().size() == 40 \
         && object.metadata.annotations.ips.split(',').slice(0, 40).sort().size() == 40 \
         && [object.metadata.annotations.ips.split(','), ['x']].flatten().size() == 126 \
         && [object.metadata.annotations.ips.split(',')].flatten(3).size() == 125 \
         && object.metadata.annotations.ips.split(',').flatten(size([c.name, c.image])).size() == 125 \
         && lists.range(30).sort().size() == 30 && [3, 1, 2].sort() == [1, 2, 3] \
         && object.spec.containers.map(x, x.name).sort().size() > 0 \
         && object.spec.containers.reverse().size() > 0",
    ),
    (
        "exact-sort-by",
        "object.metadata.annotations.ips.split(',').slice(0, 40).sortBy(s, s).size() == 40 \
         && object.metadata.annotations.ips.split(',').slice(0, 40).sortBy(s, size(s)).size() == 40 \
         && object.metadata.annotations.ips.split(',').slice(0, 30).map(x, x).sortBy(n, n.size()).size() == 30 \
         && object.spec.containers.sortBy(x, x.name).size() > 0 \
         && [2, 1].sortBy(x, x) == [1, 2]",
    ),
    (
        // A predicate's error is deferred to the items after it, which may absorb it; the
        // item whose predicate failed is charged as the others (cel-go's fold goes on).
        "exact-deferred-errors",
        "object.spec.containers.exists(x, x.ports.size() > 0 || x.name == c.name) \
         && ![0, 2, 1].all(m, 10 / m > 0 && m != 2)",
    ),
    (
        "exact-selectors",
        "[authorizer.group('').resource('pods') \
         .labelSelector(object.metadata.annotations.selector) \
         .fieldSelector(object.metadata.annotations.selector)].size() == 1",
    ),
];

/// The pad of [`EXACT_CASES`] covers what one more container would cost: at most this many
/// characters (annotations may hold 256 KiB in all).
const MAX_PAD: usize = 200_000;

fn exact_expression(body: &str) -> String {
    format!(
        "object.spec.containers.all(c, {body}) \
         && object.metadata.annotations.pad == object.metadata.annotations.pad"
    )
}

/// A Pod for [`EXACT_CASES`]: `text` is 20,000 characters in 24,000 bytes (the library's
/// sizes count characters; its traversals and `string(bytes)` count bytes), `medium` 150,
/// `ips` 125 IPv6 addresses, `selector` a label selector of 199 characters, `ip` and `cidr`
/// an IPv6 address and prefix, `pad` `pad` characters.
fn library_pod(case: &str, containers: usize, pad: usize) -> Value {
    let mut object = pod(case, containers);
    object["metadata"]["name"] = json!(format!("{case}-{containers}-{pad}"));
    let ips: Vec<String> = (1..=125).map(|i| format!("2001:db8::{i:x}")).collect();
    let selector: Vec<String> = (0..20).map(|i| format!("key{i}=v{i}")).collect();
    object["metadata"]["annotations"] = json!({
        "text": format!("{}{}", "\u{e9}".repeat(4_000), "a".repeat(16_000)),
        "medium": format!("{}{}", "m".repeat(120), "\u{e9}".repeat(30)),
        "ips": ips.join(","),
        "selector": selector.join(","),
        "ip": "2001:db8::ffff",
        "cidr": "2001:db8:ffff:ffff::/64",
        "pad": "x".repeat(pad),
    });
    object
}

/// Answers every `authorizer` check (the selector case builds checks it never makes).
struct AllowsAll;

impl Authorizer for AllowsAll {
    fn authorize(&self, _: &AuthorizationCheck) -> Result<AuthorizationDecision, String> {
        Ok(AuthorizationDecision {
            allowed: true,
            reason: String::new(),
            error: String::new(),
        })
    }
}

/// The containers and pad length at which `expression` costs exactly the limit in Portcullis.
fn exact_boundary(expression: &str) -> (usize, usize) {
    let env = CelEnvironment::kubernetes().limits(CelLimits {
        max_eval_time: Duration::from_secs(120),
        ..CelLimits::default()
    });
    let program = env.compile(expression).unwrap();
    let cost = |n: usize, pad: usize| {
        let object = library_pod("probe", n, pad);
        let activation = Activation::new()
            .object(&object)
            .authorizer(Arc::new(AllowsAll), None);
        let (result, cost) = program.evaluate_with_cost(&activation);
        match result {
            Ok(value) => {
                assert_eq!(value, cel::Value::Bool(true), "{expression}");
                Some(cost)
            }
            Err(_) => None,
        }
    };
    // The most containers that leave room for at least one unit of pad.
    let fits = |n: usize| cost(n, 0).is_some_and(|units| units < LIMIT);
    assert!(
        fits(1),
        "{expression}: one container must be within the limit"
    );
    let (mut low, mut high) = (1, 2);
    while fits(high) {
        low = high;
        high *= 2;
        assert!(high < 100_000, "{expression}: never reaches the limit");
    }
    while high - low > 1 {
        let middle = (low + high) / 2;
        if fits(middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    let base = cost(low, 0).unwrap();
    let pad = 10 * (LIMIT - base) as usize;
    assert!(
        pad <= MAX_PAD,
        "{expression}: a container costs more than the pad can make up ({base} units with {low})"
    );
    assert_eq!(cost(low, pad), Some(LIMIT), "{expression}");
    assert_eq!(cost(low, pad + 1), None, "{expression}");
    (low, pad)
}

/// The per-call limit, in units.
const LIMIT: u64 = 1_000_000;

#[test]
fn library_calls_cost_the_apiserver_units_exactly() {
    let Some(bin) = e2e_bin() else { return };
    let work = tempfile::tempdir().unwrap();
    let policies = work.path().join("policies.yaml");
    let yaml: String = EXACT_CASES
        .iter()
        .map(|(name, body)| (*name, exact_expression(body)))
        .chain([("sentinel", "false".to_owned())])
        .map(|(name, expression)| {
            pod_policy_yaml(
                &format!("cost-{name}"),
                name,
                &format!(
                    "  validations:\n    - expression: {expression:?}\n      message: denied by {name}\n"
                ),
            )
        })
        .collect();
    std::fs::write(&policies, yaml).unwrap();

    // (case, containers, pad, the units Portcullis charges)
    let mut probes = Vec::new();
    for (case, body) in EXACT_CASES {
        let (n, pad) = exact_boundary(&exact_expression(body));
        eprintln!("{case}: {n} containers, a pad of {pad} characters");
        for (pad, units) in [(pad - 10, LIMIT - 1), (pad, LIMIT), (pad + 1, LIMIT + 1)] {
            probes.push((*case, units, library_pod(case, n, pad)));
        }
    }
    let mut files = Vec::new();
    for (i, (_, _, object)) in probes.iter().enumerate() {
        let file = work.path().join(format!("probe-{i}.json"));
        std::fs::write(&file, serde_json::to_vec(object).unwrap()).unwrap();
        files.push(file);
    }
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["check", "--cel-timeout", "10m", "--authorizer", "allow"])
        .args(["--output", "json", "--policies"])
        .arg(&policies)
        .args(&files)
        .output()
        .unwrap();
    let checked: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check output: {e}: {}", stderr(&output)));
    assert_eq!(checked.len(), probes.len());

    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["apply", "-f", policies.to_str().unwrap()]);
    eventually(
        "the policies to be in force",
        Duration::from_secs(60),
        || match apiserver_answer(&cluster, &pod("sentinel", 1)) {
            Err(error) if error.contains("denied by sentinel") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let mut differences = Vec::new();
    for ((case, units, object), portcullis) in probes.iter().zip(&checked) {
        let apiserver = apiserver_answer(&cluster, object);
        let allowed = portcullis["allowed"].as_bool().unwrap();
        let expected = *units <= LIMIT;
        let agree = match &apiserver {
            Ok(()) => allowed == expected && allowed,
            Err(error) => {
                !allowed
                    && !expected
                    && error.contains(LIMIT_EXCEEDED)
                    && portcullis["violations"]
                        .to_string()
                        .contains(LIMIT_EXCEEDED)
            }
        };
        eprintln!(
            "{case} at {units} units: apiserver {}, Portcullis {}",
            if apiserver.is_ok() {
                "admits"
            } else {
                "denies"
            },
            if allowed { "admits" } else { "denies" },
        );
        if !agree {
            differences.push(format!(
                "{case} at {units} units: apiserver {apiserver:?}, Portcullis {portcullis}"
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

/// The expression each budget case repeats: true on the budget cases' Pods, and charged by
/// the size of the strings it compares, so that each call costs some 240 000 units for
/// little work (the budgets are reached after tens of calls, each within the per-call limit).
const BUDGET_EXPRESSION: &str = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].all(i, \
     object.metadata.annotations['big'] == object.metadata.annotations['big'])";

/// The size of the annotation [`BUDGET_EXPRESSION`] compares (annotations may hold 256 KiB).
const BUDGET_ANNOTATION_BYTES: usize = 200_000;

fn budget_pod(name: &str) -> Value {
    let mut object = pod(name, 1);
    object["metadata"]["name"] = json!(name);
    object["metadata"]["annotations"] = json!({"big": "x".repeat(BUDGET_ANNOTATION_BYTES)});
    object
}

const OUT_OF_BUDGET: &str = "validation failed due to running out of cost budget";

/// Writes a [`budget_pod`] per name into `work` and runs `portcullis check` with `policies` on
/// them: the Pods (file and object) and check's results, in the same order.
fn check_budget_pods(
    work: &std::path::Path,
    policies: &std::path::Path,
    names: &[&str],
) -> (Vec<(std::path::PathBuf, Value)>, Vec<Value>) {
    let files: Vec<_> = names
        .iter()
        .map(|name| {
            let file = work.join(format!("{name}.json"));
            let object = budget_pod(name);
            std::fs::write(&file, serde_json::to_vec(&object).unwrap()).unwrap();
            (file, object)
        })
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["check", "--cel-timeout", "10m", "--output", "json"])
        .arg("--policies")
        .arg(policies)
        .args(files.iter().map(|(file, _)| file))
        .output()
        .unwrap();
    let checked: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("check output: {e}: {}", stderr(&output)));
    assert_eq!(checked.len(), names.len());
    (files, checked)
}

/// A policy for the budget cases: `conditions` matchConditions and `validations`
/// validations repeating [`BUDGET_EXPRESSION`], read through a variable each when
/// `through_variables`, then a validation that always fails, so that a policy that ran to the
/// end denies with `denied by <name>`.
fn budget_policy_yaml(
    name: &str,
    conditions: usize,
    validations: usize,
    through_variables: bool,
    costly_message: bool,
) -> String {
    let mut spec = String::new();
    if conditions > 0 {
        spec.push_str("  matchConditions:\n");
        for i in 0..conditions {
            spec.push_str(&format!(
                "    - name: c{i}\n      expression: {BUDGET_EXPRESSION:?}\n"
            ));
        }
    }
    if through_variables {
        spec.push_str("  variables:\n");
        for i in 0..validations {
            spec.push_str(&format!(
                "    - name: v{i}\n      expression: {BUDGET_EXPRESSION:?}\n"
            ));
        }
    }
    spec.push_str("  validations:\n");
    for i in 0..validations {
        let expression = if through_variables {
            format!("variables.v{i}")
        } else {
            BUDGET_EXPRESSION.to_owned()
        };
        spec.push_str(&format!("    - expression: {expression:?}\n"));
    }
    spec.push_str(&format!(
        "    - expression: \"false\"\n      message: denied by {name}\n"
    ));
    if costly_message {
        let message = format!("({BUDGET_EXPRESSION}) ? 'denied by {name}' : 'wrong'");
        spec.push_str(&format!("      messageExpression: {message:?}\n"));
    }
    pod_policy_yaml(name, name, &spec)
}

/// The apiserver shares a budget of 10 000 000 units among a policy's validations (the
/// variables they read counted with them) and one of 2 500 000 among its matchConditions;
/// the call that overruns it stops the policy with `validation failed due to running out of
/// cost budget, no further validation rules will be run`; the messageExpressions are charged to
/// what the validations left (`failed messageExpression: …`). For each budget, a policy with as
/// many calls as fit and one with one call more, checked by Portcullis and by the apiserver.
#[test]
fn the_policy_budgets_stop_the_same_policies_as_the_apiserver() {
    let env = CelEnvironment::kubernetes().limits(CelLimits {
        max_eval_time: Duration::from_secs(120),
        ..CelLimits::default()
    });
    let program = env.compile(BUDGET_EXPRESSION).unwrap();
    let probe = budget_pod("probe");
    let (result, cost) = program.evaluate_with_cost(&Activation::new().object(&probe));
    assert!(
        result.is_ok() && cost > 100_000,
        "{result:?} at {cost} units"
    );
    // A validation reading a variable adds 2 units (`variables`, then `.vN`).
    let fits = (10_000_000 / cost) as usize;
    let fits_through_variables = (10_000_000 / (cost + 2)) as usize;
    let conditions_fit = (2_500_000 / cost) as usize;
    eprintln!(
        "one call costs {cost} units: {fits} validations fit ({fits_through_variables} through \
         variables), {conditions_fit} matchConditions"
    );
    // (name, matchConditions, validations, through variables, a messageExpression as costly
    // as a validation, what the apiserver says)
    let ran_to_the_end = |name: &str| format!("denied by {name}");
    let stopped = |_: &str| OUT_OF_BUDGET.to_owned();
    let message_failed = |_: &str| format!("failed messageExpression: {OUT_OF_BUDGET}");
    type Expect = dyn Fn(&str) -> String;
    let cases: [(&str, usize, usize, bool, bool, &Expect); 8] = [
        (
            "budget-validations-fit",
            0,
            fits,
            false,
            false,
            &ran_to_the_end,
        ),
        (
            "budget-validations-over",
            0,
            fits + 1,
            false,
            false,
            &stopped,
        ),
        (
            "budget-variables-fit",
            0,
            fits_through_variables,
            true,
            false,
            &ran_to_the_end,
        ),
        (
            "budget-variables-over",
            0,
            fits_through_variables + 1,
            true,
            false,
            &stopped,
        ),
        (
            "budget-conditions-fit",
            conditions_fit,
            0,
            false,
            false,
            &ran_to_the_end,
        ),
        (
            "budget-conditions-over",
            conditions_fit + 1,
            0,
            false,
            false,
            &stopped,
        ),
        // The messages run after the validations, on what they left.
        (
            "budget-messages-fit",
            0,
            fits - 1,
            false,
            true,
            &ran_to_the_end,
        ),
        (
            "budget-messages-over",
            0,
            fits,
            false,
            true,
            &message_failed,
        ),
    ];
    let work = tempfile::tempdir().unwrap();
    let policies = work.path().join("policies.yaml");
    let yaml: String = cases
        .iter()
        .map(|(name, conditions, validations, variables, message, _)| {
            budget_policy_yaml(name, *conditions, *validations, *variables, *message)
        })
        .collect();
    std::fs::write(&policies, yaml).unwrap();
    let names: Vec<&str> = cases.iter().map(|(name, ..)| *name).collect();
    let (files, checked) = check_budget_pods(work.path(), &policies, &names);
    // Portcullis on its own: every policy ran to its end, or was stopped by its budget.
    for ((name, .., expect), portcullis) in cases.iter().zip(&checked) {
        let violations = portcullis["violations"].to_string();
        let expected = expect(name);
        assert!(violations.contains(&expected), "{name}: {violations}");
    }

    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["apply", "-f", policies.to_str().unwrap()]);
    let (last, _) = &files[files.len() - 1];
    let last_name = cases[cases.len() - 1].0;
    let last_object: Value = serde_json::from_slice(&std::fs::read(last).unwrap()).unwrap();
    eventually(
        "the budget policies to be in force",
        Duration::from_secs(60),
        || match apiserver_answer(&cluster, &last_object) {
            Err(error) if error.contains(last_name) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    let mut differences = Vec::new();
    for (((name, .., expect), (_, object)), portcullis) in cases.iter().zip(&files).zip(&checked) {
        let apiserver = apiserver_answer(&cluster, object).unwrap_err();
        let expected = expect(name);
        eprintln!("{name}: apiserver {apiserver}");
        if !apiserver.contains(&expected) {
            differences.push(format!(
                "{name}: apiserver {apiserver:?}, Portcullis {}",
                portcullis["violations"]
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}

/// A MutatingAdmissionPolicy for Pods labelled `cost-case: <name>`: `variables` variables
/// repeating [`BUDGET_EXPRESSION`], and `mutations` mutations of `patch_type` (each labels the
/// Pod `mutation-<i>: ran`) that each read every variable.
fn mutation_budget_policy_yaml(
    name: &str,
    variables: usize,
    mutations: usize,
    patch_type: &str,
) -> String {
    let read_all = (0..variables)
        .map(|i| format!("variables.v{i}"))
        .collect::<Vec<_>>()
        .join(" && ");
    let mut spec = String::from("  variables:\n");
    for i in 0..variables {
        spec.push_str(&format!(
            "    - name: v{i}\n      expression: {BUDGET_EXPRESSION:?}\n"
        ));
    }
    spec.push_str("  mutations:\n");
    for i in 0..mutations {
        let label = format!("mutation-{i}");
        let (field, expression) = match patch_type {
            "ApplyConfiguration" => (
                "applyConfiguration",
                format!(
                    "Object{{metadata: Object.metadata{{labels: {{'{label}': ({read_all}) ? \
                     'ran' : 'no'}}}}}}"
                ),
            ),
            _ => (
                "jsonPatch",
                format!(
                    "[JSONPatch{{op: 'add', path: '/metadata/labels/{label}', value: \
                     ({read_all}) ? 'ran' : 'no'}}]"
                ),
            ),
        };
        spec.push_str(&format!(
            "    - patchType: {patch_type}\n      {field}:\n        expression: {expression:?}\n"
        ));
    }
    let match_constraints = cost_case_match(name);
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: {name}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
{match_constraints}{spec}---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: {name}
spec:
  policyName: {name}
---
"
    )
}

/// The apiserver gives each mutation of a MutatingAdmissionPolicy a budget of 10 000 000 units
/// of its own, for the mutation and the variables it reads (`RuntimeCELCostBudget` per
/// `Patch`); the mutation that overruns it fails with `validation failed due to running out of
/// cost budget, …`, which denies under `failurePolicy: Fail`. For each patch type, a policy
/// whose mutations each read as many variables as fit (two mutations: each has its own budget)
/// and one whose mutation reads one more, checked by Portcullis and by the apiserver.
#[test]
fn the_mutation_budget_stops_the_same_mutations_as_the_apiserver() {
    let env = CelEnvironment::kubernetes().limits(CelLimits {
        max_eval_time: Duration::from_secs(120),
        ..CelLimits::default()
    });
    let program = env.compile(BUDGET_EXPRESSION).unwrap();
    let (_, cost) = program.evaluate_with_cost(&Activation::new().object(&budget_pod("probe")));
    // Reading a variable adds 2 units (`variables`, then `.vN`); the rest of the mutation (the
    // `&&`s, the conditional, building the patch) a few dozen.
    let fits = ((10_000_000 - 1_000) / (cost + 2)) as usize;
    assert!(
        (fits + 1) as u64 * cost > 10_000_000,
        "one call costs {cost}"
    );
    // (name, variables, mutations, patch type, whether the mutations ran)
    let cases = [
        ("budget-apply-fit", fits, 2, "ApplyConfiguration", true),
        (
            "budget-apply-over",
            fits + 1,
            1,
            "ApplyConfiguration",
            false,
        ),
        ("budget-patch-fit", fits, 2, "JSONPatch", true),
        ("budget-patch-over", fits + 1, 1, "JSONPatch", false),
    ];
    let work = tempfile::tempdir().unwrap();
    let policies = work.path().join("policies.yaml");
    let yaml: String = cases
        .iter()
        .map(|(name, variables, mutations, patch_type, _)| {
            mutation_budget_policy_yaml(name, *variables, *mutations, patch_type)
        })
        .collect();
    std::fs::write(&policies, yaml).unwrap();
    let names: Vec<&str> = cases.iter().map(|(name, ..)| *name).collect();
    let (files, checked) = check_budget_pods(work.path(), &policies, &names);
    let labels_of = |object: &Value| {
        let labels = &object["metadata"]["labels"];
        (0..2)
            .map(|i| {
                labels[format!("mutation-{i}")]
                    .as_str()
                    .unwrap_or("-")
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    // Portcullis on its own: both mutations ran within their own budgets, or the one over its
    // budget denied the request.
    for ((name, _, mutations, _, ran), portcullis) in cases.iter().zip(&checked) {
        if *ran {
            assert_eq!(portcullis["allowed"], true, "{name}: {portcullis}");
            let labels = labels_of(&portcullis["patchedObject"]);
            assert_eq!(labels, vec!["ran"; *mutations], "{name}");
        } else {
            let violations = portcullis["violations"].to_string();
            assert_eq!(portcullis["allowed"], false, "{name}: {violations}");
            assert!(violations.contains(OUT_OF_BUDGET), "{name}: {violations}");
        }
    }

    let Some(bin) = e2e_bin() else { return };
    let cluster = ControlPlane::start(&bin);
    cluster.kubectl_ok(&["apply", "-f", policies.to_str().unwrap()]);
    let in_force = |object: &Value| {
        let output = cluster.kubectl_stdin(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            &serde_json::to_string(object).unwrap(),
        );
        if output.status.success() {
            Ok(serde_json::from_slice::<Value>(&output.stdout).unwrap())
        } else {
            Err(stderr(&output))
        }
    };
    let (_, last) = &files[files.len() - 1];
    eventually(
        "the mutation budget policies to be in force",
        Duration::from_secs(60),
        || match in_force(last) {
            Err(error) if error.contains(OUT_OF_BUDGET) => Ok(()),
            other => Err(format!("{:?}", other.map(|o| labels_of(&o)))),
        },
    );
    let mut differences = Vec::new();
    for (((name, ..), (_, object)), portcullis) in cases.iter().zip(&files).zip(&checked) {
        let apiserver = in_force(object);
        eprintln!("{name}: apiserver {:?}", apiserver.as_ref().map(&labels_of));
        let agrees = match &apiserver {
            Ok(mutated) => {
                portcullis["allowed"] == true
                    && labels_of(mutated) == labels_of(&portcullis["patchedObject"])
            }
            Err(error) => {
                let message = portcullis["violations"][0]["message"]
                    .as_str()
                    .unwrap_or("-");
                portcullis["allowed"] == false
                    && error.contains(OUT_OF_BUDGET)
                    && error.contains(message)
            }
        };
        if !agrees {
            differences.push(format!(
                "{name}: apiserver {:?}, Portcullis {}",
                apiserver.map(|o| labels_of(&o)),
                portcullis["violations"]
            ));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}
