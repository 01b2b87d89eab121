//! `data.inventory` changed one object at a time, for watches that keep it current (`serve`'s
//! sync of a Config's `syncOnly` kinds). The value's maps are shared copy-on-write: a change
//! copies only the maps on the object's path, so snapshots taken before it stay as they were
//! and cost nothing to keep.

use regorus::Value as RegoValue;

use super::Inventory;

/// The path of `object` in the inventory: `["cluster", apiVersion, kind]` or
/// `["namespace", namespace, apiVersion, kind]`, and its name.
fn path_of(object: &serde_json::Value) -> Option<(Vec<&str>, &str)> {
    let text = |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str);
    let (api_version, kind, name) = (
        text("/apiVersion")?,
        text("/kind")?,
        text("/metadata/name")?,
    );
    let path = match text("/metadata/namespace").filter(|n| !n.is_empty()) {
        Some(namespace) => vec!["namespace", namespace, api_version, kind],
        None => vec!["cluster", api_version, kind],
    };
    Some((path, name))
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory::empty()
    }
}

impl Inventory {
    /// An inventory without objects: `{"cluster": {}, "namespace": {}}`.
    pub fn empty() -> Self {
        Inventory::of(std::iter::empty())
    }

    /// Adds `object`, or replaces the object of its kind, namespace and name; one without
    /// `apiVersion`, `kind` or a name is left out, as [`Inventory::of`] leaves it out.
    pub fn insert(&mut self, object: &serde_json::Value) {
        let Some((path, name)) = path_of(object) else {
            return;
        };
        let mut at = &mut self.0;
        for key in path {
            if at.as_object().is_err() {
                *at = RegoValue::new_object();
            }
            let Ok(map) = at.as_object_mut() else {
                return;
            };
            at = map.get_or_insert_with(RegoValue::from(key), RegoValue::new_object);
        }
        if at.as_object().is_err() {
            *at = RegoValue::new_object();
        }
        if let Ok(names) = at.as_object_mut() {
            names.insert(RegoValue::from(name), RegoValue::from(object.clone()));
        }
    }

    /// Removes the object of `object`'s kind, namespace and name (only those fields are
    /// read), and the maps it leaves empty below `cluster` and `namespace`.
    pub fn remove(&mut self, object: &serde_json::Value) {
        let Some((path, name)) = path_of(object) else {
            return;
        };
        fn remove_at(at: &mut RegoValue, path: &[&str], name: &str) -> bool {
            let Ok(map) = at.as_object_mut() else {
                return false;
            };
            match path.split_first() {
                None => {
                    map.remove(&RegoValue::from(name));
                }
                Some((key, rest)) => {
                    let key = RegoValue::from(*key);
                    let emptied = match map.get_mut(&key) {
                        Some(inner) => remove_at(inner, rest, name),
                        None => return false,
                    };
                    if emptied {
                        map.remove(&key);
                    }
                }
            }
            map.is_empty()
        }
        let Ok(top) = self.0.as_object_mut() else {
            return;
        };
        let root = RegoValue::from(path[0]);
        if let Some(inner) = top.get_mut(&root)
            && remove_at(inner, &path[1..], name)
        {
            // Keep `cluster` and `namespace` themselves, as an empty inventory has them.
            *inner = RegoValue::new_object();
        }
    }

    /// The inventory as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.0).unwrap_or_default()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        let Ok(top) = self.0.as_object() else {
            return true;
        };
        top.values()
            .all(|part| part.as_object().map_or(true, |map| map.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn config_map(namespace: &str, name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace}, "data": {"k": data}})
    }

    fn as_json(inventory: &Inventory) -> Value {
        inventory.to_json()
    }

    #[test]
    fn inserts_and_removals_give_what_a_fresh_inventory_of_the_objects_gives() {
        let a = config_map("one", "a", "1");
        let b = config_map("two", "b", "2");
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        let mut inventory = Inventory::empty();
        assert!(inventory.is_empty());
        for object in [&a, &b, &node] {
            inventory.insert(object);
        }
        assert_eq!(
            as_json(&inventory),
            as_json(&Inventory::of([&a, &b, &node]))
        );
        let changed = config_map("one", "a", "changed");
        inventory.insert(&changed);
        assert_eq!(
            as_json(&inventory),
            as_json(&Inventory::of([&changed, &b, &node]))
        );
        inventory.remove(&b);
        inventory.remove(&node);
        assert_eq!(as_json(&inventory), as_json(&Inventory::of([&changed])));
        inventory.remove(&changed);
        assert!(inventory.is_empty());
        assert_eq!(as_json(&inventory), json!({"cluster": {}, "namespace": {}}));
    }

    #[test]
    fn snapshots_do_not_see_later_changes() {
        let a = config_map("one", "a", "1");
        let mut inventory = Inventory::empty();
        inventory.insert(&a);
        let snapshot = inventory.clone();
        inventory.insert(&config_map("one", "b", "2"));
        inventory.remove(&a);
        assert_eq!(as_json(&snapshot), as_json(&Inventory::of([&a])));
    }

    #[test]
    fn objects_without_a_name_are_left_out() {
        let mut inventory = Inventory::empty();
        inventory.insert(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}));
        assert!(inventory.is_empty());
    }
}
