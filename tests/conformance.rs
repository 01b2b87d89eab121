//! Generated differential test against the real kube-apiserver (issue #13): seeded
//! ValidatingAdmissionPolicies and MutatingAdmissionPolicies (`tests/conformance/grammar.rs`)
//! are loaded into the e2e apiserver and given to `portcullis check`; every generated object is
//! judged by both (the apiserver through a `dryRun=All` create, Portcullis on the object as the
//! apiserver defaulted it), and decision, denial message, warnings, audit annotations (from the
//! apiserver's audit log) and mutated object must agree or be a known, documented divergence
//! (`tests/conformance/compare.rs`, docs/conformance.md).
//!
//! `CONFORMANCE_SEEDS` (comma-separated) and `CONFORMANCE_CASES` choose the run (`make
//! conformance SEED=… CASES=…`); the default is the CI seed set. Needs `PORTCULLIS_E2E_BIN`
//! (skipped without it, failed under `CI=true`). The minimised divergences live in
//! `tests/fixtures/conformance/`: replayed against the apiserver by the generated test, and
//! checked without it by `minimised_divergences_are_as_recorded`.

mod common;
#[path = "conformance/compare.rs"]
mod compare;
#[path = "conformance/counts.rs"]
mod counts;
#[path = "conformance/fixtures.rs"]
mod fixtures;
#[path = "conformance/grammar.rs"]
mod grammar;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::control_plane::{ControlPlane, PORTCULLIS, e2e_bin, eventually, stderr};
use compare::{Answer, Divergence, KNOWN, NEW};
use grammar::{Actions, GROUP_LABEL, KINDS, Kind, NAMESPACE, ROUND_LABEL, Rng};
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// The CI seed set: `make test` runs these.
const CI_SEEDS: [u64; 3] = [1, 2, 3];
const CI_CASES: usize = 3000;

/// Objects per round, and the groups of denying policies they are spread over.
const OBJECTS_PER_ROUND: usize = 12;
const DENY_GROUPS: usize = 3;

struct Totals {
    cases: usize,
    objects: usize,
    rounds: usize,
    refused_policies: usize,
    agreed_objects: usize,
    divergent_cases: BTreeMap<&'static str, usize>,
    /// Per order-dependent class, the answers the apiserver's order of policies can change.
    order_sensitive: BTreeMap<&'static str, usize>,
    examples: BTreeMap<&'static str, Vec<Value>>,
    started: Instant,
}

#[test]
fn generated_policies_agree_with_the_apiserver() {
    let Some(bin) = e2e_bin() else { return };
    let seeds: Vec<u64> = match std::env::var("CONFORMANCE_SEEDS") {
        Ok(text) if !text.trim().is_empty() => text
            .split(',')
            .map(|s| s.trim().parse().expect("CONFORMANCE_SEEDS: numbers"))
            .collect(),
        _ => CI_SEEDS.to_vec(),
    };
    let cases: usize = std::env::var("CONFORMANCE_CASES")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("CONFORMANCE_CASES: a number"))
        .unwrap_or(CI_CASES);
    let audit_log = AuditLog::new();
    let cluster = ControlPlane::start_with(&bin, &audit_log.apiserver_args());
    cluster.kubectl_ok(&["create", "namespace", NAMESPACE]);
    cluster.apply(&grammar::params_config_map().to_string());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(cluster.client());
    let work = tempfile::tempdir().unwrap();
    let mut totals = Totals {
        cases: 0,
        objects: 0,
        rounds: 0,
        refused_policies: 0,
        agreed_objects: 0,
        divergent_cases: BTreeMap::new(),
        order_sensitive: BTreeMap::new(),
        examples: BTreeMap::new(),
        started: Instant::now(),
    };
    let harness = Harness {
        cluster: &cluster,
        runtime: &runtime,
        client: &client,
        work: work.path(),
        audit_log: &audit_log,
    };
    let replayed = replay_fixtures(&harness);
    assert!(
        replayed.is_empty(),
        "the apiserver no longer answers as tests/fixtures/conformance records:\n{}",
        replayed.join("\n")
    );
    let per_seed = cases.div_ceil(seeds.len());
    let mut round_id = 0u64;
    for seed in &seeds {
        let target = totals.cases + per_seed;
        let mut round_in_seed = 0u64;
        while totals.cases < target {
            round_id += 1;
            let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(round_in_seed));
            let kind = KINDS[(round_in_seed % KINDS.len() as u64) as usize];
            round_in_seed += 1;
            run_round(&harness, &mut rng, kind, round_id, &mut totals);
        }
    }
    // The CI seed set is compared with the recorded counts; other runs only print theirs.
    let ci = seeds == CI_SEEDS && cases == CI_CASES;
    let recorded = ci.then(counts::load);
    report(&totals, &seeds, recorded.as_ref());
    let mut failures = Vec::new();
    let new = totals.divergent_cases.get(NEW).copied().unwrap_or(0);
    if new > 0 {
        failures.push(format!(
            "{new} divergences of no known class (examples above; all of them in \
             target/tmp/conformance/divergences.json)"
        ));
    }
    if let Some(recorded) = &recorded {
        failures.extend(counts::validate(recorded, &CI_SEEDS, CI_CASES));
        failures.extend(counts::check(
            recorded,
            &counts::Observed {
                counts: &totals.divergent_cases,
                order_sensitive: &totals.order_sensitive,
                examples: &totals.examples,
            },
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn report(totals: &Totals, seeds: &[u64], recorded: Option<&counts::Recorded>) {
    let divergent: usize = totals.divergent_cases.values().sum();
    eprintln!(
        "conformance: seeds {seeds:?}: {} cases over {} objects in {} rounds, {:.0?}",
        totals.cases,
        totals.objects,
        totals.rounds,
        totals.started.elapsed()
    );
    eprintln!(
        "conformance: {} generated policies refused by the apiserver at create (not run)",
        totals.refused_policies
    );
    eprintln!(
        "conformance: {} cases agreed, {divergent} divergent; {} of {} objects agreed entirely",
        totals.cases - divergent.min(totals.cases),
        totals.agreed_objects,
        totals.objects
    );
    let known = KNOWN.iter().chain(compare::KNOWN_REFUSALS);
    let classes: std::collections::BTreeSet<&str> = known
        .clone()
        .map(|k| k.class)
        .chain(totals.divergent_cases.keys().copied())
        .collect();
    for class in classes {
        let count = totals.divergent_cases.get(class).copied().unwrap_or(0);
        let record = match recorded.and_then(|r| r.classes.get(class)) {
            Some(counts::Class { count: Some(n), .. }) => format!(", recorded {n}"),
            Some(counts::Class {
                min: Some(min),
                max: Some(max),
                ..
            }) => format!(", recorded {min}..={max}"),
            _ if recorded.is_some() => ", not recorded".to_owned(),
            _ => String::new(),
        };
        let sensitive = match totals.order_sensitive.get(class) {
            Some(n) if compare::ORDER_DEPENDENT.contains(&class) => {
                format!("; {n} answers the order of policies can change")
            }
            None if compare::ORDER_DEPENDENT.contains(&class) => {
                "; 0 answers the order of policies can change".to_owned()
            }
            _ => String::new(),
        };
        let note = known.clone().find(|k| k.class == class).map_or(
            "NOT KNOWN: minimise, fix or document it".to_owned(),
            |k| {
                if count > 0 {
                    format!("known ({}): {}", k.issue, k.reason)
                } else {
                    format!("known ({})", k.issue)
                }
            },
        );
        eprintln!("conformance:   {class}: {count}{record}{sensitive}  [{note}]");
    }
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance");
    std::fs::create_dir_all(&out).unwrap();
    let path = out.join("divergences.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&totals.examples).unwrap(),
    )
    .unwrap();
    eprintln!("conformance: examples of each class in {}", path.display());
    if totals.divergent_cases.contains_key(NEW) {
        // The divergent texts only: the objects and policies are in divergences.json.
        eprintln!(
            "conformance: NEW divergences (first 8 shapes):\n{}",
            counts::examples(totals.examples.get(NEW), 8)
        );
    }
}

/// What a round talks to.
#[derive(Clone, Copy)]
struct Harness<'a> {
    cluster: &'a ControlPlane,
    runtime: &'a tokio::runtime::Runtime,
    client: &'a kube::Client,
    work: &'a std::path::Path,
    audit_log: &'a AuditLog,
}

/// One generated object with the bookkeeping of its round.
struct Case {
    object: Value,
    mutating: bool,
    cases: usize,
}

/// The minimised divergences, replayed against the apiserver: the answers they record must be
/// its answers. Returns the mismatches, each with the answer seen.
fn replay_fixtures(harness: &Harness<'_>) -> Vec<String> {
    let Harness {
        cluster,
        runtime,
        client,
        audit_log,
        ..
    } = *harness;
    let mut mismatches = Vec::new();
    for (i, (name, fixture)) in fixtures::all().into_iter().enumerate() {
        let round = 1_000_000 + i as u64;
        let list = json!({"apiVersion": "v1", "kind": "List", "items": fixture.policies});
        if let Some(refused) = &fixture.refused {
            let output = cluster.kubectl_stdin(&["create", "-f", "-"], &list.to_string());
            let message = stderr(&output);
            if output.status.success() || !message.contains(refused.as_str()) {
                mismatches.push(format!(
                    "{name}: expected a refusal containing {refused:?}, got: {message}"
                ));
            }
            delete_round(cluster, &fixture.policies);
            continue;
        }
        let mut manifest = fixture.policies.clone();
        manifest.extend(sentinels(round));
        let list = json!({"apiVersion": "v1", "kind": "List", "items": manifest});
        let applied = cluster.kubectl_stdin(&["create", "-f", "-"], &list.to_string());
        assert!(applied.status.success(), "{name}: {}", stderr(&applied));
        wait_for_sentinels(runtime, client, round);
        let kind = KINDS
            .into_iter()
            .find(|k| fixture.object["kind"] == k.name())
            .expect("a fixture object of a generated kind");
        let answer = runtime.block_on(dry_run(client, kind, &fixture.object));
        let mut seen = compare::apiserver_answer(
            answer.status,
            &answer.body,
            answer.warnings,
            fixture.mutating(),
        );
        seen.audit = audit_log
            .annotations(std::iter::once(answer.audit_id.as_str()))
            .remove(&answer.audit_id)
            .unwrap_or_default();
        let expected = fixture.apiserver.clone().unwrap_or_default();
        // Audit annotations compared as the apiserver writes them, on both sides.
        let without_audit = |answer: &Answer| Answer {
            audit: BTreeMap::new(),
            ..answer.clone()
        };
        if !compare::differences(&without_audit(&expected), &without_audit(&seen)).is_empty()
            || expected.audit != seen.audit
            || (expected.code, &expected.reason) != (seen.code, &seen.reason)
        {
            mismatches.push(format!(
                "{name}: the apiserver answers\n{}",
                serde_norway::to_string(&seen).unwrap()
            ));
        }
        let mut documents = fixture.policies;
        documents.extend(sentinels(round));
        delete_round(cluster, &documents);
    }
    mismatches
}

/// Waits until the sentinels of `round` act: the informers deliver in order, so every
/// policy created before them acts too.
fn wait_for_sentinels(runtime: &tokio::runtime::Runtime, client: &kube::Client, round: u64) {
    let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("probe-{round}"), "namespace": NAMESPACE,
                     "labels": {ROUND_LABEL: round.to_string(), GROUP_LABEL: "probe"}}});
    let marker = format!("sentinel {round}");
    eventually(
        "the round's policies to be active",
        Duration::from_secs(60),
        || {
            let DryRun {
                status,
                body,
                warnings,
                ..
            } = runtime.block_on(dry_run(client, Kind::ConfigMap, &probe));
            let mutated = body["metadata"]["annotations"]["conformance.example.com/sentinel"]
                == json!(round.to_string());
            let warned = warnings.iter().any(|w| w.ends_with(&marker));
            (status == 201 && mutated && warned)
                .then_some(())
                .ok_or_else(|| format!("{status} {warnings:?} {body}"))
        },
    );
}

fn run_round(harness: &Harness<'_>, rng: &mut Rng, kind: Kind, round: u64, totals: &mut Totals) {
    let Harness {
        cluster,
        runtime,
        client,
        work,
        audit_log,
    } = *harness;
    // Policies of this round: two warning ones for every object, one denying one per group,
    // mutating ones for the `mutate` group.
    let mut policies = Vec::new();
    let mut cases_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut warn_cases = 0;
    let mut deny_cases = Vec::new();
    // Denying policies first: the apiserver reports the first denial in the order of policy
    // names (`c…-d…` before `c…-w…`), Portcullis in document order.
    for group in 0..DENY_GROUPS {
        let set = grammar::validating_policy(
            rng,
            kind,
            &format!("c{round}-d{group}"),
            round,
            Actions::Deny,
            Some(group),
        );
        deny_cases.push(set.cases_per_object);
        cases_of.insert(format!("c{round}-d{group}"), set.cases_per_object);
        policies.extend(set.documents);
    }
    for i in 0..2 {
        let set = grammar::validating_policy(
            rng,
            kind,
            &format!("c{round}-w{i}"),
            round,
            Actions::Warn,
            None,
        );
        warn_cases += set.cases_per_object;
        cases_of.insert(format!("c{round}-w{i}"), set.cases_per_object);
        policies.extend(set.documents);
    }
    let mut mutate_cases = 0;
    if kind.mutable() {
        for i in 0..1 + rng.below(2) {
            let set = grammar::mutating_policy(rng, kind, &format!("c{round}-m{i}"), round);
            mutate_cases += set.cases_per_object;
            cases_of.insert(format!("c{round}-m{i}"), set.cases_per_object);
            policies.extend(set.documents);
        }
    }

    // Objects: spread over the deny groups, one group with no denying policy, and `mutate`.
    let mut cases = Vec::new();
    for index in 0..OBJECTS_PER_ROUND {
        let slot = index % (DENY_GROUPS + 1 + usize::from(kind.mutable()));
        let mut object = grammar::object(rng, kind, round, index, slot);
        let (mutating, count) = if slot == DENY_GROUPS + 1 {
            object["metadata"]["labels"][GROUP_LABEL] = json!("mutate");
            (true, mutate_cases)
        } else if slot == DENY_GROUPS {
            (false, warn_cases)
        } else {
            (false, warn_cases + deny_cases[slot])
        };
        cases.push(Case {
            object,
            mutating,
            cases: count,
        });
    }

    // The objects as the apiserver defaults them, before any policy of this round exists.
    let mut plain_warnings: Vec<Vec<String>> = Vec::new();
    let defaulted: Vec<Value> = runtime
        .block_on(dry_run_all(client, kind, &cases))
        .into_iter()
        .zip(&cases)
        .map(
            |(
                DryRun {
                    status,
                    body,
                    warnings,
                    ..
                },
                case,
            )| {
                plain_warnings.push(warnings);
                assert!(
                    (200..300).contains(&status),
                    "generated object {} refused without policies: {status} {}",
                    case.object["metadata"]["name"],
                    body["message"]
                );
                body
            },
        )
        .collect();

    // Load the round's policies, then wait for its sentinels: the informers deliver in order,
    // so once they act, every policy before them does too.
    let mut manifest = policies.clone();
    manifest.extend(sentinels(round));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": manifest});
    let applied = cluster.kubectl_stdin(&["create", "-f", "-"], &list.to_string());
    if !applied.status.success() {
        // The apiserver type-checks expressions at create and refuses what does not compile;
        // the refused policies leave the round, and Portcullis must refuse them too.
        let message = stderr(&applied);
        let refused = refused_policies(&message);
        assert!(!refused.is_empty(), "create policies: {message}");
        let mut kept = Vec::new();
        for pair in policies.chunks(2) {
            let name = pair[0]["metadata"]["name"].as_str().unwrap().to_owned();
            if refused.contains(&name) {
                totals.refused_policies += 1;
                check_refusal(work, pair, &message, &name, totals);
            } else {
                kept.extend(pair.iter().cloned());
            }
        }
        let refused_docs: Vec<Value> = policies
            .iter()
            .filter(|d| {
                let name = d["metadata"]["name"].as_str().unwrap();
                refused
                    .iter()
                    .any(|r| name == r || name == format!("{r}-binding"))
            })
            .cloned()
            .collect();
        delete_round(cluster, &refused_docs);
        policies = kept;
    }
    wait_for_sentinels(runtime, client, round);

    let answers = runtime.block_on(dry_run_all(client, kind, &cases));

    // Portcullis: the same policies (and the parameter ConfigMap), the defaulted objects.
    let policy_file = work.join(format!("policies-{round}.json"));
    let mut documents = policies.clone();
    // Portcullis takes parameter objects from the policy files when a policy has a paramKind.
    if policies.iter().any(|d| !d["spec"]["paramKind"].is_null()) {
        documents.push(grammar::params_config_map());
    }
    let stream: String = documents.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&policy_file, stream).unwrap();
    let objects_file = work.join(format!("objects-{round}.json"));
    let stream: String = defaulted.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&objects_file, stream).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(&policy_file)
        .arg(&objects_file)
        .output()
        .unwrap();
    totals.rounds += 1;
    let results: Vec<Value> = match output.status.code() {
        Some(0 | 1) => serde_json::from_slice(&output.stdout).unwrap(),
        _ => {
            // Portcullis refuses the policies the apiserver took: one divergence per case.
            let message = stderr(&output);
            let count: usize = cases.iter().map(|c| c.cases).sum();
            record(
                totals,
                &Divergence {
                    class: NEW,
                    what: "policies refused by check",
                    apiserver: Some("created".into()),
                    portcullis: Some(message),
                },
                count,
                json!({"round": round, "policies": policies}),
            );
            totals.cases += count;
            totals.objects += cases.len();
            delete_round(cluster, &policies);
            return;
        }
    };
    assert_eq!(results.len(), cases.len());
    // The same objects with the policies in reverse order: what the apiserver answers when it
    // runs them in the other order (it runs them in Go's map order).
    let reversed_results = check_all(work, &reversed(&policies), &objects_file);
    assert_eq!(reversed_results.len(), cases.len());

    let audit = audit_log.annotations(answers.iter().map(|a| a.audit_id.as_str()));
    for (((((case, answer), result), input), plain), reversed_result) in cases
        .iter()
        .zip(answers)
        .zip(&results)
        .zip(&defaulted)
        .zip(&plain_warnings)
        .zip(&reversed_results)
    {
        // The apiserver's own warnings about the object (not admission's) are not compared.
        let mut warnings = answer.warnings.clone();
        warnings.retain(|w| !plain.contains(w));
        let mut from_apiserver =
            compare::apiserver_answer(answer.status, &answer.body, warnings, case.mutating);
        from_apiserver.audit = audit.get(&answer.audit_id).cloned().unwrap_or_default();
        let from_portcullis = compare::portcullis_answer(result, input, case.mutating);
        let mut divergences = compare::differences(&from_apiserver, &from_portcullis);
        let in_reverse = compare::portcullis_answer(reversed_result, input, case.mutating);
        let mutating_policies = policies_for(&policies, input)
            .iter()
            .filter(|d| d["kind"] == "MutatingAdmissionPolicy")
            .count();
        // Denials of several ValidatingAdmissionPolicies: the apiserver reports the first in its
        // order of policies, Portcullis the first in its file order. The first denial of each
        // policy, by Portcullis's list of violations.
        let mut first_denials: Vec<(&str, &str)> = Vec::new();
        for violation in result["violations"].as_array().into_iter().flatten() {
            let policy = violation["policy"].as_str().unwrap_or_default();
            if !first_denials.iter().any(|(p, _)| *p == policy) {
                first_denials.push((policy, violation["message"].as_str().unwrap_or_default()));
            }
        }
        // What the order of policies can change in this answer: the order-dependent classes'
        // recorded maximum.
        if !case.mutating && first_denials.len() >= 2 {
            *totals
                .order_sensitive
                .entry(compare::POLICY_ORDER)
                .or_default() += 1;
        }
        for difference in compare::differences(&in_reverse, &from_portcullis) {
            let class = if difference.class == "audit-failure-order" {
                "audit-failure-order"
            } else if mutating_policies >= 2 && compare::ORDER_SHAPES.contains(&difference.what) {
                compare::POLICY_ORDER
            } else {
                continue;
            };
            *totals.order_sensitive.entry(class).or_default() += 1;
        }
        // Another validating policy's denial first: the apiserver's message is the first denial
        // of a policy Portcullis also denies for, not its first.
        for divergence in divergences.iter_mut().filter(|d| d.class == NEW) {
            if !case.mutating
                && divergence.what == "message"
                && let Some(message) = &divergence.apiserver
                && first_denials
                    .iter()
                    .skip(1)
                    .any(|(_, first)| first == message)
            {
                divergence.class = compare::POLICY_ORDER;
            }
        }
        // Two MutatingAdmissionPolicies the apiserver ran in the other order than Portcullis's
        // file order: the object, decision or message differ, and Portcullis, given the
        // policies in reverse order, answers as the apiserver did (nothing else differs then
        // that did not differ before).
        if mutating_policies >= 2
            && divergences.iter().any(|d| d.class == NEW)
            && divergences
                .iter()
                .filter(|d| d.class == NEW)
                .all(|d| compare::ORDER_SHAPES.contains(&d.what))
        {
            let same = |x: &Divergence, y: &Divergence| {
                (x.what, &x.apiserver, &x.portcullis) == (y.what, &y.apiserver, &y.portcullis)
            };
            let remaining = compare::differences(&from_apiserver, &in_reverse);
            let reproduced = remaining
                .iter()
                .all(|r| r.class != NEW && divergences.iter().any(|d| same(d, r)));
            if reproduced {
                for divergence in divergences.iter_mut().filter(|d| d.class == NEW) {
                    divergence.class = compare::POLICY_ORDER;
                }
            }
        }
        for divergence in divergences.iter_mut().filter(|d| d.class == NEW) {
            divergence.class = explain(work, &policies, input, result, divergence);
        }
        let count: usize = policies_for(&policies, input)
            .iter()
            .filter_map(|d| cases_of.get(d["metadata"]["name"].as_str().unwrap_or("")))
            .sum();
        totals.cases += count;
        totals.objects += 1;
        if divergences.is_empty() {
            totals.agreed_objects += 1;
        }
        for divergence in &divergences {
            let context = json!({
                "round": round,
                "object": input,
                "policies": policies_for(&policies, &case.object),
                "apiserver": from_apiserver,
                "portcullis": from_portcullis,
            });
            record(totals, divergence, 1, context);
        }
    }
    let mut documents = policies;
    documents.extend(sentinels(round));
    delete_round(cluster, &documents);
}

/// Known causes that the texts alone cannot show, each confirmed by running `check` again:
/// audit annotations written after a matchCondition failed, and a MutatingAdmissionPolicy the
/// apiserver invoked once more after its own change.
fn explain(
    work: &std::path::Path,
    policies: &[Value],
    input: &Value,
    result: &Value,
    divergence: &Divergence,
) -> &'static str {
    let with_params = |mut documents: Vec<Value>| {
        if documents.iter().any(|d| !d["spec"]["paramKind"].is_null()) {
            documents.push(grammar::params_config_map());
        }
        documents
    };
    // The validating policy a divergent text names: an audit key `policy.key` or a message
    // `ValidatingAdmissionPolicy 'policy' …`.
    let named = |text: &str| -> Option<usize> {
        let name = match text.split_once("ValidatingAdmissionPolicy '") {
            Some((_, rest)) => rest.split('\'').next()?.to_owned(),
            None => text.split_once('.')?.0.to_owned(),
        };
        policies
            .iter()
            .position(|d| d["metadata"]["name"] == name && d["kind"] == "ValidatingAdmissionPolicy")
    };
    if divergence.what == "warning"
        && divergence.portcullis.is_none()
        && let Some(text) = &divergence.apiserver
        && let Some(i) = named(text)
        && policies[i]["spec"]["failurePolicy"] == "Ignore"
    {
        // A warning the apiserver gives where Portcullis's evaluation failed under Ignore:
        // under Fail, Portcullis's error shows; is it of a known cause?
        let mut documents = policies.to_vec();
        documents[i]["spec"]["failurePolicy"] = json!("Fail");
        let again = check_one(work, &with_params(documents), input);
        let before = result["warnings"].as_array().cloned().unwrap_or_default();
        let revealed = again["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|w| !before.iter().any(|b| b == w))
            .map(|w| {
                compare::classify(&compare::Item {
                    what: "warning",
                    apiserver: Some(text),
                    portcullis: Some(w),
                    status: None,
                    mutating: false,
                })
            })
            .find(|class| *class != NEW);
        if let Some(class) = revealed {
            return class;
        }
    }
    NEW
}

/// `portcullis check --output json` of one object under `documents`.
fn check_one(work: &std::path::Path, documents: &[Value], object: &Value) -> Value {
    let policy_file = work.join("reordered-policies.json");
    let stream: String = documents.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&policy_file, stream).unwrap();
    let object_file = work.join("reordered-object.json");
    std::fs::write(&object_file, object.to_string()).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(&policy_file)
        .arg(&object_file)
        .output()
        .unwrap();
    let mut results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap_or_default();
    results.pop().unwrap_or_default()
}

/// The policies (policy and binding pairs) in reverse order, with the parameter ConfigMap when
/// a policy has a paramKind.
fn reversed(policies: &[Value]) -> Vec<Value> {
    let mut documents: Vec<Value> = policies
        .chunks(2)
        .rev()
        .flat_map(|pair| pair.iter().cloned())
        .collect();
    if documents.iter().any(|d| !d["spec"]["paramKind"].is_null()) {
        documents.push(grammar::params_config_map());
    }
    documents
}

/// `portcullis check --output json` of the objects in `objects` under `documents`: one result
/// per object.
fn check_all(work: &std::path::Path, documents: &[Value], objects: &std::path::Path) -> Vec<Value> {
    let policy_file = work.join("reversed-policies.json");
    let stream: String = documents.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&policy_file, stream).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(&policy_file)
        .arg(objects)
        .output()
        .unwrap();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "check with the policies reversed: {}",
        stderr(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Names of the policies in kubectl's `… "NAME" is invalid` errors.
fn refused_policies(message: &str) -> Vec<String> {
    message
        .split(" is invalid")
        .filter_map(|before| {
            let before = before.strip_suffix('"')?;
            let start = before.rfind('"')?;
            Some(before[start + 1..].to_owned())
        })
        .collect()
}

/// A policy the apiserver refused at create: Portcullis must refuse it too.
fn check_refusal(
    work: &std::path::Path,
    pair: &[Value],
    apiserver: &str,
    name: &str,
    totals: &mut Totals,
) {
    let file = work.join(format!("refused-{name}.json"));
    let mut documents = pair.to_vec();
    if !pair[0]["spec"]["paramKind"].is_null() {
        documents.push(grammar::params_config_map());
    }
    let stream: String = documents.iter().map(|d| format!("---\n{d}\n")).collect();
    std::fs::write(&file, stream).unwrap();
    let object = work.join(format!("refused-{name}-object.json"));
    std::fs::write(&object, grammar::params_config_map().to_string()).unwrap();
    let output = Command::new(PORTCULLIS)
        .args(["check", "--output", "json", "--policies"])
        .arg(&file)
        .arg(&object)
        .output()
        .unwrap();
    if output.status.code() == Some(2) {
        return;
    }
    let errors = refusal_errors(apiserver, name);
    let divergence = Divergence {
        class: compare::classify_refusal(&errors),
        what: "refusal",
        apiserver: Some(errors),
        portcullis: Some("loaded".to_owned()),
    };
    record(totals, &divergence, 1, json!({"policy": pair}));
}

/// The errors kubectl printed for policy `name` (its text after `"name" is invalid: `, up to the
/// next object's error): one, or `\n* ` before each of several.
fn refusal_errors(kubectl: &str, name: &str) -> String {
    let marker = format!("\"{name}\" is invalid: ");
    let Some((_, rest)) = kubectl.split_once(&marker) else {
        return String::new();
    };
    let mut text = String::new();
    for (i, line) in rest.split_inclusive('\n').enumerate() {
        let next_object = line.starts_with("Error from server")
            || line.starts_with("The ") && line.contains("\" is invalid");
        if i > 0 && next_object {
            break;
        }
        text.push_str(line);
    }
    text.trim_end_matches('\n').to_owned()
}

/// The documents of `policies` whose binding selects `object` (by its group label).
fn policies_for(policies: &[Value], object: &Value) -> Vec<Value> {
    let group = object["metadata"]["labels"][GROUP_LABEL]
        .as_str()
        .unwrap_or("");
    let selects = |binding: &Value| {
        let selector = &binding["spec"]["matchResources"]["objectSelector"];
        let wanted = &selector["matchLabels"][GROUP_LABEL];
        let expression = &selector["matchExpressions"][0];
        let listed = expression["values"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == group));
        let by_expression = (expression["operator"] == "In") == listed;
        (wanted.is_null() || wanted == group) && by_expression
    };
    let mut out = Vec::new();
    for pair in policies.chunks(2) {
        if selects(&pair[1]) {
            out.extend(pair.iter().cloned());
        }
    }
    out
}

fn record(totals: &mut Totals, divergence: &Divergence, count: usize, context: Value) {
    *totals.divergent_cases.entry(divergence.class).or_default() += count;
    // One example per shape of divergence (names and numbers left out), a bounded number.
    let signature = format!(
        "{}: {} | {}",
        divergence.what,
        shape(divergence.apiserver.as_deref()),
        shape(divergence.portcullis.as_deref())
    );
    let examples = totals.examples.entry(divergence.class).or_default();
    if examples.len() < 100 && !examples.iter().any(|e| e["signature"] == signature) {
        let mut example = context;
        example["divergence"] = serde_json::to_value(divergence).unwrap();
        example["signature"] = json!(signature);
        examples.push(example);
    }
}

/// A divergent text without what varies between instances of one cause: policy and binding
/// names, the expression, digits.
fn shape(text: Option<&str>) -> String {
    let Some(text) = text else {
        return "-".to_owned();
    };
    let message = text.rsplit("resulted in error: ").next().unwrap_or(text);
    let message = message.rsplit("': ").next().unwrap_or(message);
    message
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(100)
        .collect()
}

/// A VAP that warns about the round's probe ConfigMap and a MAP that annotates it.
fn sentinels(round: u64) -> Vec<Value> {
    let selector = json!({"matchLabels": {ROUND_LABEL: round.to_string(), GROUP_LABEL: "probe"}});
    let rules = json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["configmaps"]}]});
    let name = format!("c{round}-sentinel");
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": rules,
                     "validations": [{"expression": "false", "message": format!("sentinel {round}")}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": format!("{name}-binding")},
            "spec": {"policyName": name, "validationActions": ["Warn"],
                     "matchResources": {"objectSelector": selector}}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": rules, "reinvocationPolicy": "Never",
                     "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                        format!("[JSONPatch{{op: 'add', path: '/metadata/annotations', value: {{'conformance.example.com/sentinel': '{round}'}}}}]")}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": format!("{name}-binding")},
            "spec": {"policyName": name, "matchResources": {"objectSelector": selector}}}),
    ]
}

fn delete_round(cluster: &ControlPlane, policies: &[Value]) {
    if policies.is_empty() {
        return;
    }
    let mut names: Vec<String> = Vec::new();
    for document in policies {
        let kind = document["kind"].as_str().unwrap().to_lowercase();
        names.push(format!(
            "{kind}.admissionregistration.k8s.io/{}",
            document["metadata"]["name"].as_str().unwrap()
        ));
    }
    let mut args = vec!["delete", "--wait=false", "--ignore-not-found"];
    args.extend(names.iter().map(String::as_str));
    let output = cluster.kubectl(&args);
    assert!(output.status.success(), "delete: {}", stderr(&output));
}

async fn dry_run_all(client: &kube::Client, kind: Kind, cases: &[Case]) -> Vec<DryRun> {
    let mut set = tokio::task::JoinSet::new();
    for (i, case) in cases.iter().enumerate() {
        let client = client.clone();
        let object = case.object.clone();
        set.spawn(async move { (i, dry_run(&client, kind, &object).await) });
    }
    let mut out = vec![DryRun::default(); cases.len()];
    while let Some(joined) = set.join_next().await {
        let (i, answer) = joined.unwrap();
        out[i] = answer;
    }
    out
}

/// The apiserver's answer to a dry-run create.
#[derive(Clone, Default)]
struct DryRun {
    status: u16,
    body: Value,
    /// The texts of the `Warning` headers.
    warnings: Vec<String>,
    /// The `Audit-Id` header: the request's event in the audit log.
    audit_id: String,
}

/// `POST …?dryRun=All`.
async fn dry_run(client: &kube::Client, kind: Kind, object: &Value) -> DryRun {
    let path = match kind.group() {
        "" => format!("/api/v1/namespaces/{NAMESPACE}/{}", kind.resource()),
        group => format!(
            "/apis/{group}/v1/namespaces/{NAMESPACE}/{}",
            kind.resource()
        ),
    };
    let request = http::Request::post(format!("{path}?dryRun=All"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(object.to_string().into_bytes()))
        .unwrap();
    let response = client.send(request).await.expect("the apiserver answers");
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .map(warning_text)
        .collect();
    let audit_id = response
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    DryRun {
        status,
        body,
        warnings,
        audit_id,
    }
}

/// The text of a `Warning: 299 - "text"` header (RFC 7234 quoted string).
fn warning_text(header: &str) -> String {
    let quoted = header
        .strip_prefix("299 - \"")
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or(header);
    let mut text = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                text.push(next);
            }
        } else {
            text.push(c);
        }
    }
    text
}

/// The minimised divergences under `tests/fixtures/conformance/`, without the apiserver:
/// Portcullis answers what each records (the apiserver's answer, or its own for a known
/// divergence; the generated test replays the apiserver's side).
#[test]
fn minimised_divergences_are_as_recorded() {
    let work = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let all = fixtures::all();
    for (name, fixture) in &all {
        let known = fixture.class != "agrees";
        if known
            && !KNOWN
                .iter()
                .chain(compare::KNOWN_REFUSALS)
                .any(|k| k.class == fixture.class)
        {
            failures.push(format!(
                "{name}: class {:?} is not a known cause ({})",
                fixture.class, fixture.issue
            ));
        }
        let (code, answer) = fixtures::check(work.path(), name, fixture);
        if fixture.refused.is_some() {
            // Known: Portcullis still loads what the apiserver refuses; agrees: it refuses too.
            if (code != 2) != known {
                failures.push(format!("{name}: check exit code {code}"));
            }
            continue;
        }
        let expected = if known {
            fixture.portcullis.clone()
        } else {
            fixture.apiserver.clone()
        }
        .unwrap_or_else(|| panic!("{name}: the answer to expect"));
        match answer {
            Some(answer) if compare::differences(&expected, &answer).is_empty() => {}
            answer => failures.push(format!(
                "{name}: Portcullis answers\n{}",
                serde_norway::to_string(&answer).unwrap()
            )),
        }
        if known
            && let (Some(apiserver), Some(portcullis)) = (&fixture.apiserver, &fixture.portcullis)
        {
            let differences = compare::differences(apiserver, portcullis);
            assert!(
                !differences.is_empty(),
                "{name}: a known divergence whose answers agree"
            );
            // The recorded answers are the class's shape: its matcher recognises them.
            for difference in differences {
                if difference.class != fixture.class {
                    failures.push(format!(
                        "{name}: {} classified {}, not {}",
                        difference.what, difference.class, fixture.class
                    ));
                }
            }
        }
    }
    eprintln!("conformance: {} minimised cases checked", all.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The apiserver's audit log (Metadata level, the generated objects only): the audit
/// annotations of a request, found by its `Audit-Id`.
struct AuditLog {
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl AuditLog {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let policy = dir.path().join("audit-policy.yaml");
        std::fs::write(
            &policy,
            format!(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n\
                 rules:\n- level: Metadata\n  namespaces: [{NAMESPACE}]\n  resources:\n  \
                 - group: \"\"\n    resources: [configmaps, pods, services]\n  \
                 - group: apps\n    resources: [deployments]\n- level: None\n"
            ),
        )
        .unwrap();
        let args = vec![
            format!("--audit-policy-file={}", policy.display()),
            format!(
                "--audit-log-path={}",
                dir.path().join("audit.log").display()
            ),
        ];
        AuditLog { dir, args }
    }

    fn apiserver_args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    /// The audit annotations of each request in `ids` (policy keys only: the authorizer's, and
    /// the latency trace the apiserver adds to a request slower than its threshold on a busy
    /// machine, are left out), waiting until every one is in the log.
    fn annotations<'i>(
        &self,
        ids: impl Iterator<Item = &'i str>,
    ) -> BTreeMap<String, BTreeMap<String, String>> {
        let wanted: Vec<&str> = ids.filter(|id| !id.is_empty()).collect();
        let mut found = BTreeMap::new();
        eventually("the audit events", Duration::from_secs(30), || {
            let text =
                std::fs::read_to_string(self.dir.path().join("audit.log")).unwrap_or_default();
            for line in text.lines() {
                let Ok(event) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let id = event["auditID"].as_str().unwrap_or_default();
                if event["stage"] != "ResponseComplete" || !wanted.contains(&id) {
                    continue;
                }
                let annotations: BTreeMap<String, String> = event["annotations"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(key, _)| {
                        !key.starts_with("authorization.k8s.io/")
                            && !key.starts_with("apiserver.latency.k8s.io/")
                    })
                    .map(|(key, value)| {
                        (key.clone(), value.as_str().unwrap_or_default().to_owned())
                    })
                    .collect();
                found.insert(id.to_owned(), annotations);
            }
            let missing = wanted.iter().filter(|id| !found.contains_key(**id)).count();
            (missing == 0)
                .then_some(())
                .ok_or_else(|| format!("{missing} events not in the audit log yet"))
        });
        found
    }
}

/// The CI seeds' policies use every construct the grammar has (a change to the grammar that
/// made one unreachable would silently stop testing it); no apiserver needed.
#[test]
fn the_grammar_reaches_each_construct() {
    let mut text = String::new();
    for seed in CI_SEEDS {
        for round in 0..24u64 {
            let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(round));
            let kind = KINDS[(round % KINDS.len() as u64) as usize];
            for set in [
                grammar::validating_policy(&mut rng, kind, "v", round, Actions::Deny, None),
                grammar::mutating_policy(&mut rng, kind, "m", round),
            ] {
                for document in &set.documents {
                    text.push_str(&document.to_string());
                }
            }
        }
    }
    let missing: Vec<&str> = [
        ".all(",
        ".exists(",
        ".existsOne(",
        ".exists_one(",
        ".map(",
        ".filter(",
        ".transformList(",
        ".transformMap(",
        ".transformMapEntry(",
        "variables.",
        "params.",
        "messageExpression",
        ".orValue(",
    ]
    .into_iter()
    .filter(|construct| !text.contains(construct))
    .collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}

/// The recorded counts: the file is consistent (the CI seed set, every known class, ranges only
/// for the order-dependent ones), and a run above or below a record fails, naming the class.
#[test]
fn recorded_counts_are_checked() {
    let recorded = counts::load();
    let problems = counts::validate(&recorded, &CI_SEEDS, CI_CASES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // A run that matches the file passes; one more or one fewer of a class fails.
    let exact: Vec<&'static str> = counts::known_classes()
        .into_iter()
        .filter(|c| !compare::ORDER_DEPENDENT.contains(c))
        .collect();
    let matching = |recorded: &counts::Recorded| {
        let mut observed = BTreeMap::new();
        let mut sensitive = BTreeMap::new();
        for class in counts::known_classes() {
            let record = &recorded.classes[class];
            observed.insert(class, record.count.or(record.max).unwrap());
            if let Some(max) = record.max {
                sensitive.insert(class, max);
            }
        }
        (observed, sensitive)
    };
    let examples = BTreeMap::new();
    let failures = |observed: &BTreeMap<&'static str, usize>,
                    sensitive: &BTreeMap<&'static str, usize>| {
        counts::check(
            &recorded,
            &counts::Observed {
                counts: observed,
                order_sensitive: sensitive,
                examples: &examples,
            },
        )
    };
    let (observed, sensitive) = matching(&recorded);
    assert_eq!(failures(&observed, &sensitive), Vec::<String>::new());
    for class in &exact {
        let mut above = observed.clone();
        *above.get_mut(class).unwrap() += 1;
        let failed = failures(&above, &sensitive);
        assert!(
            failed.len() == 1 && failed[0].contains(class) && failed[0].contains("above"),
            "{failed:?}"
        );
        if observed[class] > 0 {
            let mut below = observed.clone();
            *below.get_mut(class).unwrap() -= 1;
            let failed = failures(&below, &sensitive);
            assert!(
                failed.len() == 1 && failed[0].contains(class) && failed[0].contains("lower"),
                "{failed:?}"
            );
        }
    }
    for class in compare::ORDER_DEPENDENT {
        // Above the range's max; and a max that is not what the order can change.
        let mut above = observed.clone();
        *above.get_mut(class).unwrap() += 1;
        let failed = failures(&above, &sensitive);
        assert!(failed.len() == 1 && failed[0].contains(class), "{failed:?}");
        let mut more = sensitive.clone();
        *more.get_mut(class).unwrap() += 1;
        let failed = failures(&observed, &more);
        assert!(
            failed.len() == 1 && failed[0].contains("raise"),
            "{failed:?}"
        );
        if sensitive[class] > 0 {
            let mut fewer = sensitive.clone();
            *fewer.get_mut(class).unwrap() -= 1;
            let mut observed = observed.clone();
            observed.insert(class, 0);
            let failed = failures(&observed, &fewer);
            assert!(
                failed.len() == 1 && failed[0].contains("lower"),
                "{failed:?}"
            );
        }
    }
    // A known class never seen before, and one unknown to the file.
    let mut unrecorded = observed.clone();
    unrecorded.insert("not-a-class", 1);
    let failed = failures(&unrecorded, &sensitive);
    assert!(
        failed.len() == 1 && failed[0].contains("not-a-class"),
        "{failed:?}"
    );
}

/// Each cause recognises its own shape and not an unrelated answer that shares its words.
#[test]
fn known_causes_recognise_their_shapes_only() {
    let warning = |policy: &str, expression: &str, error: &str| {
        format!(
            "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding \
             '{policy}-binding': expression '{expression}' resulted in error: {error}"
        )
    };
    fn classify(what: &str, apiserver: &str, portcullis: &str) -> &'static str {
        compare::classify(&compare::Item {
            what,
            apiserver: Some(apiserver),
            portcullis: Some(portcullis),
            status: None,
            mutating: false,
        })
    }

    // which-error-is-reported: two failing operands of `&&`, two elements of a comprehension.
    let and = "object.data.a == 'x' && object.data.b == 'y'";
    let which = "which-error-is-reported";
    for (expression, a, p, class) in [
        (and, "no such key: a", "no such key: b", which),
        (
            "['a', 'b'].exists(k, object.data[k] == 'v')",
            "no such key: b",
            "no such key: a",
            which,
        ),
        (
            "object.spec.ports[1].port > 0 || object.spec.x.y == 1",
            "index out of range: 1",
            "no such key: x",
            which,
        ),
        (
            "variables.v == 1",
            "composited variable \"v\" fails to evaluate: no such key: a",
            "composited variable \"v\" fails to evaluate: no such key: b",
            which,
        ),
        (
            "object.spec.containers.exists_one(x0, x0.resources.limits.cpu.substring(0, 3) == 'W')",
            "index out of range: 3",
            "no such key: cpu",
            which,
        ),
        (
            "object.spec.ports.all(p, object.metadata.labels.transformMapEntry(k, v, {p.protocol: v}).size() > 0)",
            "insert failed: key TCP already exists",
            "insert failed: key UDP already exists",
            which,
        ),
        (
            "object.spec.ports.all(p, object.metadata.name.size() > 0)",
            "insert failed: key TCP already exists",
            "insert failed: key UDP already exists",
            NEW,
        ),
        (
            "object.spec.ports.all(p, p.name.size() > 0)",
            "index out of range: 3",
            "no such key: name",
            NEW,
        ),
        // Not the shape: one place that can fail; another wording of the same error; an error
        // about nothing the expression reads; an error of no known wording.
        (
            "object.data.a == 'x'",
            "no such key: a",
            "no such key: b",
            NEW,
        ),
        (and, "no such key: a", "no such key: 'b'", NEW),
        (and, "no such key: a", "no such key: zzz", NEW),
        (
            and,
            "no such key: a",
            "no such key: b (while evaluating)",
            NEW,
        ),
        (and, "no such key: a", "invalid value", NEW),
        (and, "no such key: a", "no matching overload for _==_", NEW),
        (
            and,
            "type conversion error from 'string' to 'int'",
            "no such key: a",
            NEW,
        ),
        (
            "variables.v == 1 && variables.w == 2",
            "composited variable \"v\" fails to evaluate: no such key: a",
            "composited variable \"w\" fails to evaluate: something else",
            NEW,
        ),
    ] {
        let a = warning("c1-w0", expression, a);
        let p = warning("c1-w0", expression, p);
        assert_eq!(classify("warning", &a, &p), class, "{a}\n{p}");
    }
    // The same errors from two different policies are not one expression's.
    assert_eq!(
        classify(
            "warning",
            &warning("c1-w0", and, "no such key: a"),
            &warning("c1-w1", and, "no such key: b")
        ),
        NEW
    );

    // object-validation-after-mutation: 422 Invalid on a field a mutation sets, MAPs only.
    let invalid = "denied: Deployment.apps \"deployment-4\" is invalid: metadata.labels: Invalid \
                   value: \"c0,c1\": a valid label must be an empty string or consist of …";
    let decision = |status, mutating, apiserver| compare::Item {
        what: "decision",
        apiserver: Some(apiserver),
        portcullis: Some("allowed"),
        status,
        mutating,
    };
    let object_invalid = "object-validation-after-mutation";
    assert_eq!(
        compare::classify(&decision(Some((422, "Invalid")), true, invalid)),
        object_invalid
    );
    for other in [
        decision(Some((422, "Invalid")), false, invalid),
        decision(Some((403, "Invalid")), true, invalid),
        decision(
            Some((422, "Invalid")),
            true,
            "denied: Deployment.apps \"d\" is invalid: spec.selector: Required value",
        ),
        decision(
            Some((422, "Invalid")),
            true,
            "denied: policy 'c1-m0' with binding 'c1-m0-binding' denied request: \
             Deployment.apps \"d\" is invalid: metadata.labels: Invalid value: \"x\"",
        ),
    ] {
        assert_eq!(compare::classify(&other), NEW, "{other:?}");
    }

    // audit-failure-order: whole policies in another order; not entries moved inside one.
    let entry = |policy: &str, index: usize| {
        json!({"message": format!("{policy} rule {index} failed"), "policy": policy,
               "binding": format!("{policy}-binding"), "expressionIndex": index,
               "validationActions": ["Warn", "Audit"]})
    };
    let list = |entries: &[(&str, usize)]| {
        Value::from_iter(entries.iter().map(|(p, i)| entry(p, *i))).to_string()
    };
    let forward = list(&[("c1-d0", 2), ("c1-w1", 3), ("c1-w1", 5)]);
    for (apiserver, class) in [
        (
            list(&[("c1-w1", 3), ("c1-w1", 5), ("c1-d0", 2)]),
            "audit-failure-order",
        ),
        (list(&[("c1-w1", 5), ("c1-d0", 2), ("c1-w1", 3)]), NEW),
        (list(&[("c1-d0", 2), ("c1-w1", 5), ("c1-w1", 3)]), NEW),
    ] {
        let a = Answer {
            allowed: true,
            audit: BTreeMap::from([(
                "validation.policy.admission.k8s.io/validation_failure".to_owned(),
                apiserver.clone(),
            )]),
            ..Answer::default()
        };
        let p = Answer {
            allowed: true,
            audit: BTreeMap::from([(
                "validation.policy.admission.k8s.io.validation_failure".to_owned(),
                forward.clone(),
            )]),
            ..Answer::default()
        };
        let classes: Vec<&str> = compare::differences(&a, &p)
            .iter()
            .map(|d| d.class)
            .collect();
        assert_eq!(classes, [class], "{apiserver}");
    }

    // Refusals at create: the apiserver's own answers (tests/fixtures/load-time/observed.json)
    // that are type errors are load-time-type-checking; parse errors, undeclared references,
    // constants folded at create, format() clauses and field validation are not.
    let observed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/load-time/observed.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, answer) in observed["policies"].as_object().unwrap() {
        let Some(errors) = answer.as_array() else {
            continue;
        };
        let errors: Vec<&str> = errors.iter().filter_map(Value::as_str).collect();
        let text = match errors.as_slice() {
            [one] => (*one).to_owned(),
            several => several.iter().map(|e| format!("\n* {e}")).collect(),
        };
        let class = compare::classify_refusal(&text);
        *by_class.entry(class).or_default() += 1;
        let type_errors = [
            "found no matching overload for",
            "expected type",
            "undefined field",
            "does not support field selection",
            "cannot be range of a comprehension",
        ];
        let expected = if errors.iter().all(|e| {
            (e.contains("compilation failed: ")
                && e.lines()
                    .filter(|l| l.contains("ERROR: <input>"))
                    .all(|l| type_errors.iter().any(|t| l.contains(t))))
                || (e.contains(": must evaluate to ") && !e.ends_with("but got dyn"))
        }) {
            "load-time-type-checking"
        } else if errors.iter().all(|e| e.contains(": Unsupported value: ")) {
            "load-time-validation"
        } else {
            NEW
        };
        assert_eq!(class, expected, "{name}: {text}");
    }
    eprintln!("load-time refusals by class: {by_class:?}");
    assert!(
        by_class.get("load-time-type-checking") > Some(&50),
        "{by_class:?}"
    );
    assert!(by_class.get(NEW) > Some(&50), "{by_class:?}");
    // Words of a refusal inside another error are not the refusal.
    for text in [
        "spec.validations[0].expression: Invalid value: \"x\": compilation failed: ERROR: \
         <input>:1:1: Syntax error: mismatched input 'must evaluate to'",
        "spec.validations[0].reason: Invalid value: \"compilation failed\": must evaluate to \
         Forbidden",
        "metadata.name: Unsupported value: \"x\": supported values: \"y\"",
    ] {
        assert_eq!(compare::classify_refusal(text), NEW, "{text}");
    }
    // Several errors, as kubectl lists them for one refused object and as the apiserver's
    // message gives them among several: each must be of the shape.
    let overload = "spec.validations[0].expression: Invalid value: \"1 + 'a'\": compilation \
                    failed: ERROR: <input>:1:3: found no matching overload for '_+_' applied to \
                    '(int, string)'\n | 1 + 'a'\n | ..^";
    let output = "spec.validations[1].messageExpression: Invalid value: \"1\": must evaluate to \
                  string but got int";
    let undeclared = "spec.validations[2].expression: Invalid value: \"x\": compilation failed: \
                      ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x\n | ^";
    for (text, class) in [
        (
            format!("\n* {overload}\n* {output}"),
            "load-time-type-checking",
        ),
        (format!("[{overload}, {output}]"), "load-time-type-checking"),
        (format!("\n* {overload}\n* {undeclared}"), NEW),
        (format!("[{output}, {undeclared}]"), NEW),
    ] {
        assert_eq!(compare::classify_refusal(&text), class, "{text}");
    }
    assert_eq!(
        compare::classify_refusal(
            "spec.validations[0].reason: Unsupported value: \"Unauthorized\": supported values: \
             \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\""
        ),
        "load-time-validation"
    );
}
