//! Regular expressions: `find`, `findAll`, and `matches`, with each pattern compiled once per
//! thread and cached (the `cel` crate's own `matches` recompiles on every call).

use super::regexp_errors::go_regexp_error;
use super::*;

/// Compiled regexes, per thread (no lock on the hot path), cleared when full.
pub(super) const REGEX_CACHE_SIZE: usize = 256;

thread_local! {
    static REGEXES: RefCell<HashMap<String, regex::Regex>> = RefCell::new(HashMap::new());
}

pub(super) fn with_regex<T>(
    function: &str,
    pattern: &str,
    f: impl FnOnce(&regex::Regex) -> T,
) -> Result<T, ExecutionError> {
    REGEXES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(re) = cache.get(pattern) {
            return Ok(f(re));
        }
        let re = compile_as_go(pattern).map_err(|message| fail(function, message))?;
        let out = f(&re);
        if cache.len() >= REGEX_CACHE_SIZE {
            cache.clear();
        }
        cache.insert(pattern.to_owned(), re);
        Ok(out)
    })
}

/// `pattern` compiled, or refused as Go's `regexp` refuses it (with Go's words where
/// [`go_regexp_error`] knows them).
pub(crate) fn compile_as_go(pattern: &str) -> Result<regex::Regex, String> {
    if let Some(error) = go_regexp_error(pattern) {
        return Err(error);
    }
    regex::Regex::new(pattern).map_err(|e| {
        format!(
            "error parsing regexp: {}",
            e.to_string().lines().last().unwrap_or_default().trim()
        )
    })
}

/// Whether `text` matches `pattern`, compiled through the same cache as `matches`; `None`
/// when the pattern does not compile.
pub(crate) fn cached_regex_match(pattern: &str, text: &str) -> Option<bool> {
    with_regex("matches", pattern, |re| re.is_match(text)).ok()
}

/// How many regexes this thread has compiled and kept.
#[cfg(test)]
pub(crate) fn cached_regexes() -> usize {
    REGEXES.with(|cache| cache.borrow().len())
}

/// cel-go's units for matching `text` against a regex of `pattern_size` characters (`matches`,
/// and Kubernetes' `find`, `findAll` and `validate`): (1 + the text's length) / 10 times the
/// pattern's length / 4, each rounded up.
pub(super) fn regex_units(text: &str, pattern_size: u64) -> u64 {
    let text_units = (1 + text.chars().count() as u64).div_ceil(10);
    text_units.saturating_mul(pattern_size.div_ceil(4))
}

pub(super) fn regex_matches<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (Some(text), Some(pattern)) = (
        args.first().and_then(|a| <&str>::try_from(a.as_ref()).ok()),
        args.get(1).and_then(|a| <&str>::try_from(a.as_ref()).ok()),
    ) else {
        return Err(ExecutionError::no_such_overload(
            "matches",
            args.iter()
                .map(|a| a.get_type().name().to_owned())
                .collect(),
        ));
    };
    crate::expressions::charge_cost(regex_units(text, pattern.chars().count() as u64))?;
    let matched = with_regex("matches", pattern, |re| re.is_match(text))?;
    Ok(CowVal::owned(cel::common::types::CelBool::from(matched)))
}

pub(super) fn regex_find(args: &[Value]) -> Fallible {
    let (text, pattern) = (str_arg("find", args, 0)?, str_arg("find", args, 1)?);
    crate::expressions::charge_cost(regex_units(text, pattern.chars().count() as u64))?;
    with_regex("find", pattern, |re| {
        Value::String(Arc::new(
            re.find(text)
                .map(|m| m.as_str().to_owned())
                .unwrap_or_default(),
        ))
    })
}

pub(super) fn regex_find_all(args: &[Value]) -> Fallible {
    let (text, pattern) = (str_arg("findAll", args, 0)?, str_arg("findAll", args, 1)?);
    crate::expressions::charge_cost(regex_units(text, pattern.chars().count() as u64))?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) if *n >= 0 => *n as usize,
        Some(Value::Int(_)) | None => usize::MAX,
        Some(_) => return Err(no_overload("findAll", args)),
    };
    with_regex("findAll", pattern, |re| {
        Value::List(Arc::new(
            re.find_iter(text)
                .take(limit)
                .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
                .collect(),
        ))
    })
}
