//! The recorded count of every known divergence class for the CI seed set
//! (`tests/fixtures/conformance/known-divergences.json`), and the check of a run against it:
//! a class above its record is a regression (or a new instance to examine), a class below it
//! leaves slack that must be taken out of the file. Classes whose count depends on the
//! apiserver's order of policies (random: Go's map order) record a range; its `max` must be the
//! number of answers that order can change, which the run counts itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::compare::{self, NEW};

/// The file, as committed.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// What the file is (for its reader; not checked).
    #[allow(dead_code)]
    pub about: String,
    /// The run the counts are for: the CI seed set.
    pub seeds: Vec<u64>,
    pub cases: usize,
    pub classes: BTreeMap<String, Class>,
}

/// One class: an exact `count`, or for a class the apiserver's order decides, `min` and `max`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    /// What the class is, in a sentence (docs/conformance.md has the rest; not checked).
    #[allow(dead_code)]
    pub what: String,
    #[serde(default)]
    pub count: Option<usize>,
    #[serde(default)]
    pub min: Option<usize>,
    #[serde(default)]
    pub max: Option<usize>,
}

/// What a run saw.
pub struct Observed<'a> {
    /// Divergent cases per class.
    pub counts: &'a BTreeMap<&'static str, usize>,
    /// Per order-dependent class, how many answers the order of policies can change: what
    /// `check` answers with the policies reversed against what it answers in file order.
    pub order_sensitive: &'a BTreeMap<&'static str, usize>,
    /// Examples per class (as `record` keeps them).
    pub examples: &'a BTreeMap<&'static str, Vec<Value>>,
}

pub fn path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conformance/known-divergences.json")
}

/// The path as the messages name it.
pub const FILE: &str = "tests/fixtures/conformance/known-divergences.json";

pub fn load() -> Recorded {
    let text = std::fs::read_to_string(path()).unwrap_or_else(|e| panic!("{FILE}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{FILE}: {e}"))
}

/// Every class the test knows (compare.rs), refusals included.
pub fn known_classes() -> Vec<&'static str> {
    compare::KNOWN
        .iter()
        .chain(compare::KNOWN_REFUSALS)
        .map(|cause| cause.class)
        .collect()
}

/// The file's own consistency: the CI run it is for, every known class and no other, an exact
/// count for every class but the order-dependent ones, a range for those.
pub fn validate(recorded: &Recorded, seeds: &[u64], cases: usize) -> Vec<String> {
    let mut problems = Vec::new();
    if recorded.seeds != seeds || recorded.cases != cases {
        problems.push(format!(
            "{FILE} records seeds {:?} and {} cases; the CI seed set is seeds {seeds:?} and \
             {cases} cases: record the counts of the CI seed set",
            recorded.seeds, recorded.cases
        ));
    }
    let known = known_classes();
    for class in &known {
        let ordered = compare::ORDER_DEPENDENT.contains(class);
        match recorded.classes.get(*class) {
            None => problems.push(format!(
                "{FILE}: class {class} is known (tests/conformance/compare.rs) but not recorded: \
                 add it with its count in the CI seed set"
            )),
            Some(Class {
                count: None,
                min: Some(min),
                max: Some(max),
                ..
            }) if ordered && min <= max => {}
            Some(Class {
                count: Some(_),
                min: None,
                max: None,
                ..
            }) if !ordered => {}
            Some(_) if ordered => problems.push(format!(
                "{FILE}: class {class} depends on the apiserver's order of policies: record \
                 \"min\" and \"max\" (min <= max), not \"count\""
            )),
            Some(_) => problems.push(format!(
                "{FILE}: class {class}: record an exact \"count\" (only {:?} may record a range)",
                compare::ORDER_DEPENDENT
            )),
        }
    }
    for class in recorded.classes.keys() {
        if !known.contains(&class.as_str()) {
            problems.push(format!(
                "{FILE}: class {class} is not a known class (tests/conformance/compare.rs): \
                 remove it"
            ));
        }
    }
    problems
}

/// The run's counts against the file: every difference, worded for the developer.
pub fn check(recorded: &Recorded, observed: &Observed<'_>) -> Vec<String> {
    let mut failures = Vec::new();
    for (class, record) in &recorded.classes {
        let seen = observed.counts.get(class.as_str()).copied().unwrap_or(0);
        let examples = || examples(observed.examples.get(class.as_str()), 3);
        match (record.count, record.min, record.max) {
            (Some(count), _, _) if seen > count => failures.push(format!(
                "class {class}: {seen} divergent cases in the CI seed set, {count} recorded in \
                 {FILE}: above the record (a regression, or a new instance of the class to \
                 examine before raising the count). Examples:\n{}",
                examples()
            )),
            (Some(count), _, _) if seen < count => failures.push(format!(
                "class {class}: {seen} divergent cases in the CI seed set, {count} recorded in \
                 {FILE}: below the record; lower its \"count\" to {seen} (the file must stay \
                 exact)"
            )),
            (None, Some(min), Some(max)) => {
                if seen > max {
                    failures.push(format!(
                        "class {class}: {seen} divergent cases in the CI seed set, at most {max} \
                         recorded in {FILE} (the answers the order of policies can change): \
                         above the record. Examples:\n{}",
                        examples()
                    ));
                } else if seen < min {
                    failures.push(format!(
                        "class {class}: {seen} divergent cases in the CI seed set, at least \
                         {min} recorded in {FILE}: below the record; lower its \"min\" to \
                         {seen}"
                    ));
                }
                let sensitive = observed
                    .order_sensitive
                    .get(class.as_str())
                    .copied()
                    .unwrap_or(0);
                if sensitive > max {
                    failures.push(format!(
                        "class {class}: the apiserver's order of policies can now change \
                         {sensitive} answers of the CI seed set, {max} recorded as its \"max\" \
                         in {FILE}: above the record (examine what made more answers depend on \
                         the order, then raise \"max\" to {sensitive})"
                    ));
                } else if sensitive < max {
                    failures.push(format!(
                        "class {class}: the apiserver's order of policies can change {sensitive} \
                         answers of the CI seed set, {max} recorded as its \"max\" in {FILE}: \
                         lower \"max\" to {sensitive} (the file must stay exact)"
                    ));
                }
            }
            _ => {}
        }
    }
    for (class, seen) in observed.counts {
        if *class != NEW && !recorded.classes.contains_key(*class) {
            failures.push(format!(
                "class {class}: {seen} divergent cases in the CI seed set, none recorded in \
                 {FILE}. Examples:\n{}",
                examples(observed.examples.get(class), 3)
            ));
        }
    }
    failures
}

/// Up to `n` examples, one line each: round, what differs and both sides' texts; for the
/// admitted object only the path where it differs (the values are in divergences.json).
pub fn examples(examples: Option<&Vec<Value>>, n: usize) -> String {
    let Some(examples) = examples else {
        return "  (none kept)".to_owned();
    };
    let side = |divergence: &Value, key: &str| -> String {
        let text = divergence[key].as_str().unwrap_or("-");
        let text = if divergence["what"] == "object" {
            text.split_once(": ").map_or(text, |(path, _)| path)
        } else {
            text
        };
        let mut text: String = text.chars().take(300).collect();
        if text.len() < divergence[key].as_str().map_or(0, str::len) {
            text.push('…');
        }
        text
    };
    examples
        .iter()
        .take(n)
        .map(|example| {
            let divergence = &example["divergence"];
            format!(
                "  round {}, {}:\n    apiserver:  {}\n    portcullis: {}",
                example["round"],
                divergence["what"].as_str().unwrap_or("?"),
                side(divergence, "apiserver"),
                side(divergence, "portcullis"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
