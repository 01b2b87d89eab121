//! `semver()`, `isSemver()`: semantic versions (with the optional normalization).

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Semver {
    pub(super) major: u64,
    pub(super) minor: u64,
    pub(super) patch: u64,
    pub(super) pre: Vec<String>,
    pub(super) build: String,
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl std::fmt::Display for Semver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

impl Semver {
    pub(super) fn cmp(&self, other: &Semver) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let ord = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if ord != Ordering::Equal {
                            return ord;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

pub(super) fn parse_semver(s: &str, normalize: bool) -> Result<Semver, String> {
    // blang/semver's error text, as `semver()` returns it in the apiserver (no prefix).
    let err = |why: &str| why.to_owned();
    let mut text = s;
    if normalize {
        text = text.strip_prefix('v').unwrap_or(text);
    }
    let (rest, build) = text.split_once('+').unwrap_or((text, ""));
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let mut parts: Vec<String> = core.split('.').map(str::to_owned).collect();
    if normalize {
        while parts.len() < 3 {
            parts.push("0".to_owned());
        }
        for p in parts.iter_mut().filter(|p| !p.is_empty()) {
            let trimmed = p.trim_start_matches('0');
            *p = if trimmed.is_empty() {
                "0".to_owned()
            } else {
                trimmed.to_owned()
            };
        }
    }
    if parts.len() != 3 {
        return Err(err("No Major.Minor.Patch elements found"));
    }
    let number = |p: &str, what: &str| -> Result<u64, String> {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()) {
            return Err(err(&format!(
                "Invalid character(s) found in {what} number {p:?}"
            )));
        }
        if p.len() > 1 && p.starts_with('0') {
            return Err(err(&format!(
                "{what} number must not contain leading zeroes {p:?}"
            )));
        }
        p.parse()
            .map_err(|_| err(&format!("Invalid {what} number {p:?}")))
    };
    let ident_ok =
        |id: &str| !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let pre: Vec<String> = match pre {
        Some(p) => p.split('.').map(str::to_owned).collect(),
        None => Vec::new(),
    };
    for id in &pre {
        if !ident_ok(id)
            || (id.len() > 1 && id.starts_with('0') && id.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(err(&format!("Invalid Prerelease identifier {id:?}")));
        }
    }
    if !build.is_empty() && !build.split('.').all(ident_ok) {
        return Err(err("Invalid Build identifier"));
    }
    Ok(Semver {
        major: number(&parts[0], "Major")?,
        minor: number(&parts[1], "Minor")?,
        patch: number(&parts[2], "Patch")?,
        pre,
        build: build.to_owned(),
    })
}

pub(super) fn normalize_arg(function: &str, args: &[Value]) -> Result<bool, ExecutionError> {
    match args.get(1) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(no_overload(function, args)),
    }
}

pub(super) fn semver(args: &[Value]) -> Fallible {
    let s = str_arg("semver", args, 0)?;
    parse_semver(s, normalize_arg("semver", args)?)
        .map(wrap)
        .map_err(|e| fail("semver", e))
}

pub(super) fn is_semver(args: &[Value]) -> Fallible {
    let s = str_arg("isSemver", args, 0)?;
    Ok(Value::Bool(
        parse_semver(s, normalize_arg("isSemver", args)?).is_ok(),
    ))
}
