//! Kubernetes lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`, `includes`),
//! sets (`sets.contains`, `sets.equivalent`, `sets.intersects`) and `jsonpatch.escapeKey`.

use super::*;

pub(super) fn is_sorted(args: &[Value]) -> Fallible {
    let list = list_arg("isSorted", args, 0)?;
    for w in list.windows(2) {
        if compare("isSorted", &w[0], &w[1])? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

pub(super) fn sum(args: &[Value]) -> Fallible {
    let list = list_arg("sum", args, 0)?;
    let mut iter = list.iter();
    let Some(first) = iter.next() else {
        return Ok(Value::Int(0));
    };
    let mut total = first.clone();
    for v in iter {
        total = match (&total, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| fail("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| fail("sum", "integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => Value::Duration(*a + *b),
            _ => return Err(no_overload("sum", &[total.clone(), v.clone()])),
        };
    }
    Ok(total)
}

pub(super) fn extreme(function: &str, args: &[Value], want: Ordering) -> Fallible {
    let list = list_arg(function, args, 0)?;
    let mut iter = list.iter();
    let Some(mut best) = iter.next() else {
        return Err(fail(function, format!("{function} called on empty list")));
    };
    for v in iter {
        if compare(function, v, best)? == want {
            best = v;
        }
    }
    Ok(best.clone())
}

pub(super) fn list_min(args: &[Value]) -> Fallible {
    extreme("min", args, Ordering::Less)
}

pub(super) fn list_max(args: &[Value]) -> Fallible {
    extreme("max", args, Ordering::Greater)
}

pub(super) fn list_index_of(args: &[Value]) -> Fallible {
    let list = list_arg("indexOf", args, 0)?;
    Ok(Value::Int(
        list.iter()
            .position(|v| *v == args[1])
            .map_or(-1, |i| i as i64),
    ))
}

pub(super) fn list_last_index_of(args: &[Value]) -> Fallible {
    let list = list_arg("lastIndexOf", args, 0)?;
    Ok(Value::Int(
        list.iter()
            .rposition(|v| *v == args[1])
            .map_or(-1, |i| i as i64),
    ))
}

pub(super) fn includes(args: &[Value]) -> Fallible {
    Ok(Value::Bool(match &args[0] {
        Value::List(items) => items.contains(&args[1]),
        other => *other == args[1],
    }))
}

pub(super) fn sets_contains(args: &[Value]) -> Fallible {
    let (a, b) = (
        list_arg("sets.contains", args, 0)?,
        list_arg("sets.contains", args, 1)?,
    );
    Ok(Value::Bool(b.iter().all(|x| a.contains(x))))
}

pub(super) fn sets_equivalent(args: &[Value]) -> Fallible {
    let (a, b) = (
        list_arg("sets.equivalent", args, 0)?,
        list_arg("sets.equivalent", args, 1)?,
    );
    Ok(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}

pub(super) fn sets_intersects(args: &[Value]) -> Fallible {
    let (a, b) = (
        list_arg("sets.intersects", args, 0)?,
        list_arg("sets.intersects", args, 1)?,
    );
    Ok(Value::Bool(b.iter().any(|x| a.contains(x))))
}

pub(super) fn escape_key(args: &[Value]) -> Fallible {
    let key = str_arg("jsonpatch.escapeKey", args, 0)?;
    Ok(Value::String(Arc::new(
        key.replace('~', "~0").replace('/', "~1"),
    )))
}

/// `list.first()`: the first item as an optional (cel-go's lists extension, version 3).
pub(super) fn first(args: &[Value]) -> Fallible {
    Ok(optional(list_arg("first", args, 0)?.first().cloned()))
}

/// `list.last()`: the last item as an optional.
pub(super) fn last(args: &[Value]) -> Fallible {
    Ok(optional(list_arg("last", args, 0)?.last().cloned()))
}
