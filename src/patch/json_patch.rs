//! Applying JSON Patch operations (a MutatingAdmissionPolicy's `JSONPatch` mutations) and the
//! one minimal patch between two objects (what `/mutate` answers for all mutations).

use serde_json::Value;

use super::PatchOperation;
use super::pointer::{push_pointer_token, tokens};

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

/// The container that holds `tokens`' last token, as the library's `findObject` finds it:
/// `None` when a step is missing or not a container.
fn parent_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    let mut node = doc;
    for token in tokens {
        node = match node {
            Value::Object(map) => map.get_mut(token)?,
            Value::Array(items) => items.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    matches!(node, Value::Object(_) | Value::Array(_)).then_some(node)
}

fn get<'v>(doc: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    let mut node = doc;
    for token in tokens {
        node = match node {
            Value::Object(map) => map.get(token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

fn invalid_index(index: &str) -> String {
    match index.parse::<i64>() {
        Ok(index) => format!("Unable to access invalid index: {index}: invalid index referenced"),
        Err(_) => format!("value was not a proper array index: '{index}': invalid syntax"),
    }
}

/// Adds `value` at `tokens`; the error is the container's, before the operation's words.
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
            match key.parse::<usize>() {
                Ok(index) if index <= items.len() => {
                    items.insert(index, value);
                    Ok(())
                }
                _ => Err(invalid_index(key)),
            }
        }
        _ => Err("unknown object type".to_owned()),
    }
}

fn take(parent: &mut Value, key: &str) -> Result<Value, String> {
    match parent {
        Value::Object(map) => map
            .remove(key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
        Value::Array(items) => match key.parse::<usize>() {
            Ok(index) if index < items.len() => Ok(items.remove(index)),
            _ => Err(invalid_index(key)),
        },
        _ => Err("unknown object type".to_owned()),
    }
}

fn split(path: &str) -> Result<(Vec<String>, String), PatchError> {
    let mut tokens = tokens(path).map_err(PatchError::Failed)?;
    let last = tokens.pop().unwrap_or_default();
    Ok((tokens, last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parents, last) = split(path)?;
    let Some(parent) = parent_mut(doc, &parents) else {
        return Err(failed(format!(
            "add operation does not apply: doc is missing path: \"{path}\": missing value"
        )));
    };
    insert(parent, &last, value)
        .map_err(|e| failed(format!("error in add for path: '{path}': {e}")))
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parents, last) = split(path)?;
    let Some(parent) = parent_mut(doc, &parents) else {
        return Err(failed(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        )));
    };
    take(parent, &last).map_err(|e| failed(format!("error in remove for path: '{path}': {e}")))
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parents, last) = split(path)?;
    let Some(parent) = parent_mut(doc, &parents) else {
        return Err(failed(format!(
            "replace operation does not apply: doc is missing path: {path}: missing value"
        )));
    };
    let slot = match parent {
        Value::Object(map) => map.get_mut(&last),
        Value::Array(items) => last.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    };
    match slot {
        Some(slot) => {
            *slot = value;
            Ok(())
        }
        None => Err(failed(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        ))),
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
            let (parents, last) = split(from)?;
            let Some(parent) = parent_mut(doc, &parents) else {
                return Err(failed(format!(
                    "move operation does not apply: doc is missing from path: {from}: missing value"
                )));
            };
            let moved = take(parent, &last)
                .map_err(|e| failed(format!("error in move for path: '{last}': {e}")))?;
            let (parents, last) = split(path)?;
            let Some(parent) = parent_mut(doc, &parents) else {
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
            let from_tokens = tokens(from).map_err(PatchError::Failed)?;
            let Some(copied) = get(doc, &from_tokens).cloned() else {
                return Err(failed(format!(
                    "copy operation does not apply: doc is missing from path: {from}: missing value"
                )));
            };
            let (parents, last) = split(path)?;
            let Some(parent) = parent_mut(doc, &parents) else {
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
            let path_tokens = tokens(path).map_err(PatchError::Failed)?;
            let parent_exists = path_tokens.split_last().is_none_or(|(_, parents)| {
                get(doc, parents).is_some_and(|p| matches!(p, Value::Object(_) | Value::Array(_)))
            });
            if !parent_exists {
                return Err(failed(format!(
                    "test operation does not apply: is missing path: {path}: missing value"
                )));
            }
            match get(doc, &path_tokens) {
                Some(found) if *found == expected => Ok(()),
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
        assert_eq!(
            apply_operation(&mut doc, "replace", "/metadata/uid", Some(json!("u")), None)
                .unwrap_err()
                .to_string(),
            "replace operation does not apply: doc is missing key: /metadata/uid: missing value"
        );
    }
}
