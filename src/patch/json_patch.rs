//! Applying JSON Patch operations (a MutatingAdmissionPolicy's `JSONPatch` mutations) and the
//! one minimal patch between two objects (what `/mutate` answers for all mutations).

use serde_json::Value;

use super::PatchOperation;
use super::pointer::push_pointer_token;
use crate::kubernetes::go_text::go_quote;

/// Why an operation did not apply, worded as the apiserver's JSON Patch library
/// (`gopkg.in/evanphx/json-patch.v4` v4.13.0) words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// A `test` operation found another value. The apiserver then leaves the object as it
    /// was, without an error.
    #[error("testing value {0} failed: test failed")]
    TestFailed(String),
    /// Any other failure.
    #[error("{0}")]
    Failed(String),
}

fn failed(message: String) -> PatchError {
    PatchError::Failed(message)
}

/// A path split as the library's `findObject` splits it: on `/`, each step unescaped (`~1`,
/// `~0`), the first part dropped whatever it holds (the library does not check the leading
/// `/`); `None` for a path without a `/`.
fn split(path: &str) -> Option<(Vec<String>, String)> {
    let mut steps: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let last = steps.pop()?;
    Some((steps, last))
}

fn unescape(step: &str) -> String {
    step.replace("~1", "/").replace("~0", "~")
}

/// An index into a list of `len` items as the library reads it: negative indices count from
/// the end; `slots` is `len` for an item that must exist, `len + 1` where one may be inserted.
fn list_index(key: &str, slots: usize) -> Result<usize, String> {
    resolve_index(atoi(key)?, slots)
}

/// [`list_index`] of an index already read.
fn resolve_index(index: i64, slots: usize) -> Result<usize, String> {
    let slots = i64::try_from(slots).unwrap_or(i64::MAX);
    let resolved = if index < 0 { index + slots } else { index };
    match usize::try_from(resolved) {
        Ok(resolved) if index < slots => Ok(resolved),
        _ => Err(format!(
            "Unable to access invalid index: {index}: invalid index referenced"
        )),
    }
}

/// A list index as Go's `strconv.Atoi` reads it (an optional sign, then decimal digits), or
/// its error's words (`strconv.Atoi: parsing "x": invalid syntax`).
fn atoi(key: &str) -> Result<i64, String> {
    let digits = key.strip_prefix(['+', '-']).unwrap_or(key);
    let reason = if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        "invalid syntax"
    } else {
        match key.parse::<i64>() {
            Ok(index) => return Ok(index),
            Err(_) => "value out of range",
        }
    };
    Err(format!("strconv.Atoi: parsing {}: {reason}", go_quote(key)))
}

/// The container that holds `path`'s last step, and that step, as `findObject` finds them:
/// `None` when a step is missing or not a container.
fn find<'v>(doc: &'v mut Value, path: &str) -> Option<(&'v mut Value, String)> {
    let (steps, last) = split(path)?;
    let mut node = doc;
    for step in &steps {
        node = match node {
            Value::Object(map) => map.get_mut(step)?,
            Value::Array(items) => {
                let index = list_index(step, items.len()).ok()?;
                items.get_mut(index)?
            }
            _ => return None,
        };
    }
    matches!(node, Value::Object(_) | Value::Array(_)).then_some((node, last))
}

/// The value at `key` of `container`, as the library's `get`: a missing key of an object is
/// no value (`None`), not an error; a list's item must exist.
fn get_in(container: &Value, key: &str) -> Result<Option<Value>, String> {
    match container {
        Value::Object(map) => Ok(map.get(key).cloned()),
        Value::Array(items) => Ok(Some(items[list_index(key, items.len())?].clone())),
        _ => Ok(None),
    }
}

/// Adds `value` at `key` of `parent`; the error is the container's, before the operation's
/// words.
fn insert(parent: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match parent {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            // Only `add` words a malformed index as not an index.
            let index = atoi(key)
                .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            items.insert(resolve_index(index, items.len() + 1)?, value);
            Ok(())
        }
        _ => Err("unknown object type".to_owned()),
    }
}

fn take(parent: &mut Value, key: &str) -> Result<Value, String> {
    match parent {
        Value::Object(map) => map
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
        Value::Array(items) => Ok(items.remove(list_index(key, items.len())?)),
        _ => Err("unknown object type".to_owned()),
    }
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let Some((parent, last)) = find(doc, path) else {
        return Err(failed(format!(
            "add operation does not apply: doc is missing path: \"{path}\": missing value"
        )));
    };
    insert(parent, &last, value)
        .map_err(|e| failed(format!("error in add for path: '{path}': {e}")))
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let Some((parent, last)) = find(doc, path) else {
        return Err(failed(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        )));
    };
    take(parent, &last).map_err(|e| failed(format!("error in remove for path: '{path}': {e}")))
}

/// `replace`: an object's key is set whether or not it was there (the library's `get` of a
/// missing key is no error); a list's item must exist.
fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let Some((parent, last)) = find(doc, path) else {
        return Err(failed(format!(
            "replace operation does not apply: doc is missing path: {path}: missing value"
        )));
    };
    let missing_key = || {
        failed(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        ))
    };
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = list_index(&last, items.len()).map_err(|_| missing_key())?;
            items[index] = value;
            Ok(())
        }
        _ => Err(missing_key()),
    }
}

/// Applies one operation (`op`, `path`, and `value` or `from`) to `doc`.
pub fn apply_operation(
    doc: &mut Value,
    op: &str,
    path: &str,
    value: Option<Value>,
    from: Option<&str>,
) -> Result<(), PatchError> {
    let need_value = || {
        value
            .clone()
            .ok_or_else(|| failed("operation, missing value field: missing value".to_owned()))
    };
    let need_from =
        || from.ok_or_else(|| failed("operation, missing from field: missing value".into()));
    match op {
        "add" => add(doc, path, need_value()?),
        "remove" => remove(doc, path).map(|_| ()),
        "replace" => replace(doc, path, need_value()?),
        "move" => {
            let from = need_from()?;
            let Some((parent, last)) = find(doc, from) else {
                return Err(failed(format!(
                    "move operation does not apply: doc is missing from path: {from}: missing value"
                )));
            };
            let moved = take(parent, &last)
                .map_err(|e| failed(format!("error in move for path: '{last}': {e}")))?;
            let Some((parent, last)) = find(doc, path) else {
                return Err(failed(format!(
                    "move operation does not apply: doc is missing destination path: {path}: \
                     missing value"
                )));
            };
            insert(parent, &last, moved)
                .map_err(|e| failed(format!("error in move for path: '{path}': {e}")))
        }
        "copy" => {
            let from = need_from()?;
            let Some((parent, last)) = find(doc, from) else {
                return Err(failed(format!(
                    "copy operation does not apply: doc is missing from path: {from}: missing value"
                )));
            };
            // A missing key of an object copies as null, as the library copies no value.
            let copied = get_in(parent, &last)
                .map_err(|e| failed(format!("error in copy for from: '{from}': {e}")))?
                .unwrap_or(Value::Null);
            let Some((parent, last)) = find(doc, path) else {
                return Err(failed(format!(
                    "copy operation does not apply: doc is missing destination path: {path}: \
                     missing value"
                )));
            };
            insert(parent, &last, copied)
                .map_err(|e| failed(format!("error while adding value during copy: {e}")))
        }
        "test" => {
            let expected = need_value()?;
            if path.is_empty() {
                return if *doc == expected {
                    Ok(())
                } else {
                    Err(PatchError::TestFailed(path.to_owned()))
                };
            }
            let Some((parent, last)) = find(doc, path) else {
                return Err(failed(format!(
                    "test operation does not apply: is missing path: {path}: missing value"
                )));
            };
            let found = get_in(parent, &last)
                .map_err(|e| failed(format!("error in test for path: '{path}': {e}")))?;
            match found {
                Some(found) if found == expected => Ok(()),
                // A missing key tests equal to null, as the library's test does.
                None if expected.is_null() => Ok(()),
                _ => Err(PatchError::TestFailed(path.to_owned())),
            }
        }
        other => Err(failed(format!("Unexpected kind: {other}"))),
    }
}

fn diff_into(before: &Value, after: &Value, pointer: &mut String, ops: &mut Vec<PatchOperation>) {
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, old_value) in old {
                let len = pointer.len();
                push_pointer_token(pointer, key);
                match new.get(key) {
                    None => ops.push(PatchOperation {
                        op: "remove",
                        path: pointer.clone(),
                        value: Value::Null,
                    }),
                    Some(new_value) => diff_into(old_value, new_value, pointer, ops),
                }
                pointer.truncate(len);
            }
            for (key, new_value) in new {
                if !old.contains_key(key) {
                    let len = pointer.len();
                    push_pointer_token(pointer, key);
                    ops.push(PatchOperation {
                        op: "add",
                        path: pointer.clone(),
                        value: new_value.clone(),
                    });
                    pointer.truncate(len);
                }
            }
        }
        (Value::Array(old), Value::Array(new)) if old.len() == new.len() => {
            for (index, (old_item, new_item)) in old.iter().zip(new).enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{index}"));
                diff_into(old_item, new_item, pointer, ops);
                pointer.truncate(len);
            }
        }
        (Value::Array(old), Value::Array(new))
            if new.len() > old.len() && new[..old.len()] == old[..] =>
        {
            for item in &new[old.len()..] {
                ops.push(PatchOperation {
                    op: "add",
                    path: format!("{pointer}/-"),
                    value: item.clone(),
                });
            }
        }
        _ if before == after => {}
        _ => ops.push(PatchOperation {
            op: "replace",
            path: pointer.clone(),
            value: after.clone(),
        }),
    }
}

/// The JSON Patch from `before` to `after`: `remove`, `add` and `replace` operations, objects
/// compared key by key, arrays of equal length item by item, appended items added, any other
/// array replaced whole. A `remove` carries `"value": null`, which RFC 6902 ignores.
pub fn diff(before: &Value, after: &Value) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    diff_into(before, after, &mut String::new(), &mut ops);
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn applies_and_diffs() {
        let before =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"list": [1, 2]}});
        let mut doc = before.clone();
        apply_operation(
            &mut doc,
            "add",
            "/metadata/labels/c~1d",
            Some(json!("3")),
            None,
        )
        .unwrap();
        apply_operation(&mut doc, "remove", "/metadata/labels/a", None, None).unwrap();
        apply_operation(&mut doc, "add", "/spec/list/-", Some(json!(3)), None).unwrap();
        apply_operation(&mut doc, "replace", "/spec/list/0", Some(json!(0)), None).unwrap();
        assert!(apply_operation(&mut doc, "test", "/spec/list/0", Some(json!(9)), None).is_err());
        assert!(apply_operation(&mut doc, "add", "/missing/x", Some(json!(1)), None).is_err());
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"b": "2", "c/d": "3"}}, "spec": {"list": [0, 2, 3]}})
        );
        let ops = diff(&before, &doc);
        let mut replayed = before.clone();
        for op in &ops {
            let value = (op.op != "remove").then(|| op.value.clone());
            apply_operation(&mut replayed, op.op, &op.path, value, None).unwrap();
        }
        assert_eq!(replayed, doc);
        assert!(diff(&doc, &doc).is_empty());
    }

    #[test]
    fn malformed_list_indices_are_worded_as_strconv_atoi_words_them() {
        let error = |op: &str, path: &str, from: Option<&str>| {
            let mut doc = json!({"list": [1], "map": {}});
            let value = matches!(op, "add" | "replace" | "test").then(|| json!(2));
            apply_operation(&mut doc, op, path, value, from)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("add", "/list/x", None),
            "error in add for path: '/list/x': value was not a proper array index: 'x': \
             strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            error("remove", "/list/+", None),
            "error in remove for path: '/list/+': strconv.Atoi: parsing \"+\": invalid syntax"
        );
        assert_eq!(
            error("move", "/map/x", Some("/list/-")),
            "error in move for path: '-': strconv.Atoi: parsing \"-\": invalid syntax"
        );
        assert_eq!(
            error("remove", "/list/99999999999999999999", None),
            "error in remove for path: '/list/99999999999999999999': strconv.Atoi: parsing \
             \"99999999999999999999\": value out of range"
        );
        assert_eq!(
            error("remove", "/list/\u{1}", None),
            "error in remove for path: '/list/\u{1}': strconv.Atoi: parsing \"\\x01\": invalid \
             syntax"
        );
        // A sign and leading zeros are Atoi's too.
        let mut doc = json!({"list": [1, 2]});
        apply_operation(&mut doc, "replace", "/list/+01", Some(json!(0)), None).unwrap();
        assert_eq!(doc, json!({"list": [1, 0]}));
    }

    #[test]
    fn errors_and_test_semantics_follow_the_apiservers_library() {
        let mut doc = json!({"metadata": {"name": "a"}, "list": [1]});
        assert_eq!(
            apply_operation(
                &mut doc,
                "add",
                "/metadata/annotations/x",
                Some(json!(1)),
                None
            )
            .unwrap_err()
            .to_string(),
            "add operation does not apply: doc is missing path: \"/metadata/annotations/x\": \
             missing value"
        );
        assert_eq!(
            apply_operation(&mut doc, "add", "/list/5", Some(json!(1)), None)
                .unwrap_err()
                .to_string(),
            "error in add for path: '/list/5': Unable to access invalid index: 5: invalid index \
             referenced"
        );
        assert_eq!(
            apply_operation(&mut doc, "test", "/metadata/name", Some(json!("b")), None),
            Err(PatchError::TestFailed("/metadata/name".into()))
        );
        // A missing key tests equal to null.
        assert_eq!(
            apply_operation(&mut doc, "test", "/metadata/uid", Some(json!(null)), None),
            Ok(())
        );
        // A missing key of an object is replaced all the same (v1.37.2 sets it); a list's
        // item must exist.
        apply_operation(&mut doc, "replace", "/metadata/uid", Some(json!("u")), None).unwrap();
        assert_eq!(doc["metadata"]["uid"], "u");
        assert_eq!(
            apply_operation(&mut doc, "replace", "/list/1", Some(json!(2)), None)
                .unwrap_err()
                .to_string(),
            "replace operation does not apply: doc is missing key: /list/1: missing value"
        );
        // The first step is dropped whatever it is, as the library splits paths.
        assert_eq!(
            apply_operation(&mut doc, "add", "metadata/labels/x", Some(json!("y")), None)
                .unwrap_err()
                .to_string(),
            "add operation does not apply: doc is missing path: \"metadata/labels/x\": missing \
             value"
        );
        apply_operation(&mut doc, "add", "x/metadata/y", Some(json!("z")), None).unwrap();
        assert_eq!(doc["metadata"]["y"], "z");
        // Negative indices count from the end; a missing key copies as null.
        // (an add at -1 goes before the slot past the end, as the library counts it).
        apply_operation(&mut doc, "add", "/list/-1", Some(json!(0)), None).unwrap();
        assert_eq!(doc["list"], json!([1, 0]));
        apply_operation(&mut doc, "remove", "/list/-2", None, None).unwrap();
        assert_eq!(doc["list"], json!([0]));
        apply_operation(
            &mut doc,
            "copy",
            "/metadata/copied",
            None,
            Some("/metadata/nothing"),
        )
        .unwrap();
        assert_eq!(doc["metadata"]["copied"], json!(null));
    }
}
