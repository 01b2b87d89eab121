//! Applying JSON Patch operations (a MutatingAdmissionPolicy's `JSONPatch` mutations) and the
//! one minimal patch between two objects (what `/mutate` answers for all mutations).

use serde_json::Value;

use super::PatchOperation;
use super::pointer::{push_pointer_token, tokens};

fn parent_mut<'v>(doc: &'v mut Value, tokens: &[String]) -> Result<&'v mut Value, String> {
    let mut node = doc;
    for token in tokens {
        node = match node {
            Value::Object(map) => map
                .get_mut(token)
                .ok_or_else(|| format!("path segment {token:?} does not exist"))?,
            Value::Array(items) => {
                let index: usize = token
                    .parse()
                    .map_err(|_| format!("invalid array index {token:?}"))?;
                items
                    .get_mut(index)
                    .ok_or_else(|| format!("array index {index} out of bounds"))?
            }
            _ => return Err(format!("path segment {token:?} is inside a scalar")),
        };
    }
    Ok(node)
}

fn get<'v>(doc: &'v Value, path: &str) -> Result<&'v Value, String> {
    let mut node = doc;
    for token in tokens(path)? {
        node = match node {
            Value::Object(map) => map
                .get(&token)
                .ok_or_else(|| format!("path {path:?} does not exist"))?,
            Value::Array(items) => token
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i))
                .ok_or_else(|| format!("path {path:?} does not exist"))?,
            _ => return Err(format!("path {path:?} does not exist")),
        };
    }
    Ok(node)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let tokens = tokens(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) => {
            if last == "-" {
                items.push(value);
            } else {
                let index: usize = last
                    .parse()
                    .map_err(|_| format!("invalid array index {last:?}"))?;
                if index > items.len() {
                    return Err(format!("array index {index} out of bounds"));
                }
                items.insert(index, value);
            }
        }
        _ => return Err(format!("cannot add {path:?}: its parent is a scalar")),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let tokens = tokens(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        return Err("cannot remove the whole document".into());
    };
    match parent_mut(doc, parents)? {
        Value::Object(map) => map
            .remove(last)
            .ok_or_else(|| format!("cannot remove {path:?}: it does not exist")),
        Value::Array(items) => {
            let index: usize = last
                .parse()
                .map_err(|_| format!("invalid array index {last:?}"))?;
            if index >= items.len() {
                return Err(format!("cannot remove {path:?}: it does not exist"));
            }
            Ok(items.remove(index))
        }
        _ => Err(format!("cannot remove {path:?}: its parent is a scalar")),
    }
}

/// Applies one operation (`op`, `path`, and `value` or `from`) to `doc`.
pub fn apply_operation(
    doc: &mut Value,
    op: &str,
    path: &str,
    value: Option<Value>,
    from: Option<&str>,
) -> Result<(), String> {
    let need_value = || {
        value
            .clone()
            .ok_or_else(|| format!("{op} operation needs a value"))
    };
    let need_from = || from.ok_or_else(|| format!("{op} operation needs from"));
    match op {
        "add" => add(doc, path, need_value()?),
        "remove" => remove(doc, path).map(|_| ()),
        "replace" => {
            let value = need_value()?;
            remove(doc, path)?;
            add(doc, path, value)
        }
        "move" => {
            let moved = remove(doc, need_from()?)?;
            add(doc, path, moved)
        }
        "copy" => {
            let copied = get(doc, need_from()?)?.clone();
            add(doc, path, copied)
        }
        "test" => {
            if get(doc, path)? == &need_value()? {
                Ok(())
            } else {
                Err(format!("test operation for path {path:?} failed"))
            }
        }
        other => Err(format!("unsupported JSON Patch operation {other:?}")),
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
}
