//! The crate's layers point one way (docs/architecture.md): the graph of `crate::<module>`
//! references between top-level modules has no cycle, and policy documents know nothing of the
//! engine, the server or the commands. `scripts/module-graph.py` prints the same graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(folder: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Top-level module → the top-level modules its code names as `crate::<module>`.
fn module_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.iter().next().unwrap().to_str().unwrap();
        let module = first.strip_suffix(".rs").unwrap_or(first).to_owned();
        if module == "lib" || module == "main" {
            continue;
        }
        let targets = graph.entry(module.clone()).or_default();
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (at, _) in line.match_indices("crate::") {
                let preceded = line[..at].chars().next_back();
                if preceded.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let target: String = line[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !target.is_empty() && target != module {
                    targets.insert(target);
                }
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &Graph, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &Graph,
        node: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(node).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn top_level_modules_have_no_cycle() {
    let graph = module_graph();
    assert!(
        graph.contains_key("engine") && graph.contains_key("policy"),
        "{graph:?}"
    );
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            panic!("module cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn documents_and_shared_words_know_nothing_above_them() {
    let graph = module_graph();
    let allowed: [(&str, &[&str]); 5] = [
        ("policy", &["admission", "vocabulary"]),
        ("vocabulary", &[]),
        ("names", &[]),
        ("go_text", &[]),
        ("patch", &["go_text"]),
    ];
    for (module, may_use) in allowed {
        let uses: Vec<&String> = graph[module]
            .iter()
            .filter(|target| !may_use.contains(&target.as_str()))
            .collect();
        assert!(uses.is_empty(), "{module} must not use {uses:?}");
    }
}

#[test]
fn the_graph_sees_references() {
    // The check above could pass on a graph that reads nothing: the engine compiles policy
    // documents, so that edge must be seen.
    assert!(module_graph()["engine"].contains("policy"));
}
