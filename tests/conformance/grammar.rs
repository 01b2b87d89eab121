//! The seeded generator of the conformance test: objects (Deployments, Pods, Services,
//! ConfigMaps), ValidatingAdmissionPolicies and MutatingAdmissionPolicies whose CEL is drawn
//! from a small typed grammar over the fields of those objects. Deterministic: the same seed
//! gives the same documents.

use serde_json::{Value, json};

/// A small PCG-style generator (no crate): deterministic across platforms.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        rng.next();
        rng
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 11
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The kinds objects are drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Deployment,
    Pod,
    Service,
    ConfigMap,
}

pub const KINDS: [Kind; 4] = [Kind::Deployment, Kind::Pod, Kind::Service, Kind::ConfigMap];

impl Kind {
    #[allow(dead_code)]
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Deployment => "apps/v1",
            _ => "v1",
        }
    }

    #[allow(dead_code)]
    pub fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::Pod => "Pod",
            Kind::Service => "Service",
            Kind::ConfigMap => "ConfigMap",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            Kind::Deployment => "apps",
            _ => "",
        }
    }

    pub fn resource(self) -> &'static str {
        match self {
            Kind::Deployment => "deployments",
            Kind::Pod => "pods",
            Kind::Service => "services",
            Kind::ConfigMap => "configmaps",
        }
    }

    /// The path of the object's container list, if it has one.
    fn containers(self) -> Option<&'static str> {
        match self {
            Kind::Deployment => Some("object.spec.template.spec.containers"),
            Kind::Pod => Some("object.spec.containers"),
            _ => None,
        }
    }

    /// Kinds whose object a MutatingAdmissionPolicy may change here: a Service's cluster IP is
    /// allocated anew by every dry run, a Pod's spec is mostly immutable in ways we do not model.
    pub fn mutable(self) -> bool {
        matches!(self, Kind::Deployment | Kind::ConfigMap)
    }
}

/// Labels the test uses to route objects to policies.
pub const ROUND_LABEL: &str = "conformance.example.com/round";
pub const GROUP_LABEL: &str = "conformance.example.com/group";
pub const NAMESPACE: &str = "conformance";
pub const PARAMS: &str = "conformance-params";

const IMAGES: [&str; 7] = [
    "nginx",
    "nginx:latest",
    "nginx:1.27.3",
    "registry.example.com/shop/web:1.4.2",
    "registry.example.com:5000/tools/debug@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "busybox:1.36",
    "ghcr.io/example/api:v2.0.0-rc.1",
];
const TEAMS: [&str; 4] = ["shop", "platform", "data", "Shop"];
const WORDS: [&str; 10] = [
    "web", "api", "a", "", "web-1", "Web", "10.0.0.1", "1.2.3", "500m", "x.y",
];
const QUANTITIES: [&str; 8] = ["128Mi", "1Gi", "500m", "2", "0.5", "1e3", "64M", "1500m"];

/// The object of `kind` number `index` of a round.
pub fn object(rng: &mut Rng, kind: Kind, round: u64, index: usize, group: usize) -> Value {
    let name = match rng.below(8) {
        0 => format!("{}-with-a-rather-long-name-{index}", kind.resource()),
        1 => format!("x{index}"),
        _ => format!("{}-{index}", &kind.resource()[..kind.resource().len() - 1]),
    };
    let mut labels = serde_json::Map::new();
    labels.insert(ROUND_LABEL.into(), json!(round.to_string()));
    labels.insert(GROUP_LABEL.into(), json!(format!("g{group}")));
    if rng.chance(60) {
        labels.insert("app".into(), json!(rng.pick(&["web", "api", "db"])));
    }
    if rng.chance(50) {
        labels.insert("team".into(), json!(rng.pick(&TEAMS)));
    }
    if rng.chance(20) {
        labels.insert("example.com/tier".into(), json!(rng.pick(&["gold", "1"])));
    }
    let mut metadata = json!({"name": name, "namespace": NAMESPACE, "labels": labels});
    if rng.chance(40) {
        let mut annotations = serde_json::Map::new();
        annotations.insert(
            "owner".into(),
            json!(rng.pick(&["alice", "bob@example.com", ""])),
        );
        if rng.chance(50) {
            annotations.insert(
                "example.com/url".into(),
                json!(rng.pick(&[
                    "https://example.com:8443/a?b=c",
                    "not a url",
                    "http://[::1]/x"
                ])),
            );
        }
        metadata["annotations"] = Value::Object(annotations);
    }
    match kind {
        Kind::Deployment => {
            let spec = pod_spec(rng);
            let mut deployment = json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
                "spec": {
                    "replicas": rng.below(8),
                    "selector": {"matchLabels": {"app": "x"}},
                    "template": {"metadata": {"labels": {"app": "x"}}, "spec": spec},
                },
            });
            if rng.chance(30) {
                deployment["spec"]["minReadySeconds"] = json!(rng.below(30));
            }
            deployment
        }
        Kind::Pod => {
            // `priority` is the Priority admission plugin's: it refuses one set by hand.
            let spec = pod_spec(rng);
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
        }
        Kind::Service => {
            let ports: Vec<Value> = (0..1 + rng.below(3))
                .map(|i| {
                    let mut port = json!({
                        "name": format!("p{i}"),
                        "port": *rng.pick(&[80, 443, 8080, 9090, 53]) + i as i64,
                        "protocol": rng.pick(&["TCP", "UDP"]),
                    });
                    if rng.chance(50) {
                        port["targetPort"] = json!(rng.pick(&[8080, 9000]));
                    }
                    port
                })
                .collect();
            let mut spec = json!({"ports": ports, "selector": {"app": "web"}});
            if rng.chance(50) {
                spec["type"] = json!(rng.pick(&["ClusterIP", "NodePort"]));
            }
            json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec})
        }
        Kind::ConfigMap => {
            let mut data = serde_json::Map::new();
            for key in ["mode", "replicas", "endpoint", "list"] {
                if rng.chance(55) {
                    let value = match key {
                        "mode" => rng.pick(&["strict", "relaxed", "STRICT"]).to_string(),
                        "replicas" => rng.pick(&["3", "10", "-1", "x"]).to_string(),
                        "endpoint" => rng
                            .pick(&["10.1.2.3", "https://api.example.com/v1", "::1", "nope"])
                            .to_string(),
                        _ => rng.pick(&["a,b,c", "", "b,a"]).to_string(),
                    };
                    data.insert(key.into(), json!(value));
                }
            }
            let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
            if !data.is_empty() || rng.chance(50) {
                map["data"] = Value::Object(data);
            }
            map
        }
    }
}

fn pod_spec(rng: &mut Rng) -> Value {
    let containers: Vec<Value> = (0..1 + rng.below(3))
        .map(|i| {
            let mut container = json!({"name": format!("c{i}"), "image": rng.pick(&IMAGES)});
            if rng.chance(50) {
                let mut resources = json!({});
                if rng.chance(70) {
                    resources["limits"] = json!({"memory": rng.pick(&["128Mi", "1Gi", "64M"])});
                    if rng.chance(50) {
                        resources["limits"]["cpu"] = json!(rng.pick(&["500m", "1", "2"]));
                    }
                }
                if rng.chance(50) {
                    resources["requests"] = json!({"cpu": rng.pick(&["100m", "250m"])});
                }
                container["resources"] = resources;
            }
            if rng.chance(40) {
                // Distinct per container: the apiserver warns about duplicates.
                let port = rng.pick(&[80, 8080, 9090]) + i as i64;
                container["ports"] = json!([{"containerPort": port}]);
            }
            if rng.chance(25) {
                container["securityContext"] = json!({"privileged": rng.chance(50)});
            }
            if rng.chance(25) {
                container["env"] = json!([{"name": "MODE", "value": rng.pick(&WORDS)}]);
            }
            container
        })
        .collect();
    let mut spec = json!({"containers": containers});
    if rng.chance(30) {
        spec["hostNetwork"] = json!(rng.chance(50));
    }
    if rng.chance(30) {
        spec["serviceAccountName"] = json!(rng.pick(&["default", "builder"]));
    }
    if rng.chance(25) {
        spec["nodeSelector"] = json!({"disk": rng.pick(&["ssd", "hdd"])});
    }
    spec
}

/// The parameter ConfigMap every policy with a `paramKind` is bound to (by name).
pub fn params_config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": PARAMS, "namespace": NAMESPACE},
        "data": {"maxReplicas": "4", "prefix": "web", "team": "shop", "forbidden": "latest"},
    })
}

// ------------------------------------------------------------------------------------------
// Expressions

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ty {
    Bool,
    Int,
    Str,
    StrList,
    IntList,
    StrMap,
}

const ALL_TYPES: [Ty; 6] = [
    Ty::Bool,
    Ty::Int,
    Ty::Str,
    Ty::StrList,
    Ty::IntList,
    Ty::StrMap,
];

/// What an iteration variable in scope stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Elem {
    Container,
    Port,
    Str,
    Int,
}

/// The expression generator of one policy: its kind, variables and params.
pub struct Grammar<'r> {
    pub rng: &'r mut Rng,
    pub kind: Kind,
    /// Declared variables so far: name and type.
    pub variables: Vec<(String, Ty)>,
    /// Whether `variables` may be referenced (not in matchConditions).
    pub variables_visible: bool,
    pub params: bool,
    scope: Vec<(String, Elem)>,
}

fn quote(text: impl AsRef<str>) -> String {
    let text = text.as_ref();
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

impl<'r> Grammar<'r> {
    pub fn new(rng: &'r mut Rng, kind: Kind, params: bool) -> Self {
        Grammar {
            rng,
            kind,
            variables: Vec::new(),
            variables_visible: true,
            params,
            scope: Vec::new(),
        }
    }

    fn var_of(&mut self, ty: Ty) -> Option<String> {
        if !self.variables_visible {
            return None;
        }
        let names: Vec<&String> = self
            .variables
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n)
            .collect();
        if names.is_empty() {
            return None;
        }
        Some(format!("variables.{}", self.rng.pick(&names)))
    }

    fn elem(&mut self, elem: Elem) -> Option<String> {
        let names: Vec<String> = self
            .scope
            .iter()
            .filter(|(_, e)| *e == elem)
            .map(|(n, _)| n.clone())
            .collect();
        (!names.is_empty()).then(|| self.rng.pick(&names).clone())
    }

    fn fresh(&self) -> String {
        format!("x{}", self.scope.len())
    }

    /// A whole expression of `ty`.
    pub fn expr(&mut self, ty: Ty, depth: usize) -> String {
        match ty {
            Ty::Bool => self.bool(depth),
            Ty::Int => self.int(depth),
            Ty::Str => self.string(depth),
            Ty::StrList => self.str_list(depth),
            Ty::IntList => self.int_list(depth),
            Ty::StrMap => self.str_map(depth),
        }
    }

    pub fn any_type(&mut self) -> Ty {
        *self.rng.pick(&ALL_TYPES)
    }

    /// A list to range over, and what its items are.
    fn range(&mut self, depth: usize) -> (String, Elem) {
        match (self.kind.containers(), self.rng.below(4)) {
            (Some(path), 0 | 1) => (path.to_owned(), Elem::Container),
            (_, 2) if self.kind == Kind::Service => ("object.spec.ports".to_owned(), Elem::Port),
            (_, 3) => (self.int_list(depth + 1), Elem::Int),
            _ => (self.str_list(depth + 1), Elem::Str),
        }
    }

    /// What a two-variable comprehension ranges over: a list's (index, item) pairs or a map of
    /// strings' (key, value) pairs, with what the two variables are.
    fn pairs(&mut self, depth: usize) -> (String, Elem, Elem) {
        if self.rng.chance(50) {
            let (list, elem) = self.range(depth);
            (list, Elem::Int, elem)
        } else {
            (self.str_map(depth + 1), Elem::Str, Elem::Str)
        }
    }

    /// A two-variable `all`, `exists` or `existsOne`: over a list's (index, item) pairs or a
    /// map's (key, value) pairs, with a predicate over both.
    fn two_variable_comprehension(&mut self, depth: usize) -> String {
        let macro_name = *self.rng.pick(&["all", "exists", "existsOne"]);
        let (range, first, second) = self.pairs(depth);
        let index = self.fresh();
        self.scope.push((index.clone(), first));
        let name = self.fresh();
        self.scope.push((name.clone(), second));
        let body = self.bool(depth + 1);
        self.scope.truncate(self.scope.len() - 2);
        format!("{range}.{macro_name}({index}, {name}, {body})")
    }

    /// A `transformList` of a list's (index, item) pairs into strings, with a filter or not.
    fn transform_list(&mut self, depth: usize) -> String {
        let (list, elem) = self.range(depth);
        let index = self.fresh();
        self.scope.push((index.clone(), Elem::Int));
        let name = self.fresh();
        self.scope.push((name.clone(), elem));
        let filter = if self.rng.chance(40) {
            Some(self.bool(depth + 1))
        } else {
            None
        };
        let body = self.string(depth + 1);
        self.scope.truncate(self.scope.len() - 2);
        match filter {
            Some(filter) => format!("{list}.transformList({index}, {name}, {filter}, {body})"),
            None => format!("{list}.transformList({index}, {name}, {body})"),
        }
    }

    /// A `transformMap` of a map of strings' (key, value) pairs into strings.
    fn transform_map(&mut self, depth: usize) -> String {
        let map = self.str_map(depth + 1);
        let key = self.fresh();
        self.scope.push((key.clone(), Elem::Str));
        let value = self.fresh();
        self.scope.push((value.clone(), Elem::Str));
        let body = self.string(depth + 1);
        self.scope.truncate(self.scope.len() - 2);
        format!("{map}.transformMap({key}, {value}, {body})")
    }

    /// A `transformMapEntry` of a map of strings' (key, value) pairs, or a list's (index, item)
    /// pairs, each into a one-entry map of strings (two steps yielding one key is an error).
    fn transform_map_entry(&mut self, depth: usize) -> String {
        let (range, first, second) = self.pairs(depth);
        let key = self.fresh();
        self.scope.push((key.clone(), first));
        let value = self.fresh();
        self.scope.push((value.clone(), second));
        let (entry_key, entry_value) = (self.string(depth + 1), self.string(depth + 1));
        self.scope.truncate(self.scope.len() - 2);
        format!("{range}.transformMapEntry({key}, {value}, {{{entry_key}: {entry_value}}})")
    }

    /// A list to range over, a fresh iteration variable, and a predicate over it.
    fn comprehension(&mut self, depth: usize) -> (String, String, String) {
        let (list, elem) = self.range(depth);
        let name = self.fresh();
        self.scope.push((name.clone(), elem));
        let body = self.bool(depth + 1);
        self.scope.pop();
        (list, name, body)
    }

    // ---- bool
    pub fn bool(&mut self, depth: usize) -> String {
        let leaf = depth >= 3;
        let choice = if leaf {
            self.rng.below(12)
        } else {
            self.rng.below(30)
        };
        match choice {
            0 => {
                let (a, b) = (self.int(depth + 1), self.int(depth + 1));
                let op = self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
                format!("{a} {op} {b}")
            }
            1 => {
                let (a, b) = (self.string(depth + 1), self.string(depth + 1));
                let op = self.rng.pick(&["==", "!="]);
                format!("{a} {op} {b}")
            }
            2 => {
                let s = self.string(depth + 1);
                let method = self.rng.pick(&["startsWith", "endsWith", "contains"]);
                let arg = quote(self.rng.pick(&WORDS));
                format!("{s}.{method}({arg})")
            }
            3 => {
                let s = self.string(depth + 1);
                let re =
                    self.rng
                        .pick(&["^[a-z0-9-]+$", "latest", ":[0-9]+", "^$", "[A-Z]", "a|b"]);
                format!("{s}.matches({})", quote(re))
            }
            4 => self.has(),
            5 => {
                let map = self.str_map(depth + 1);
                let key = quote(
                    self.rng
                        .pick(&["app", "team", "mode", "example.com/tier", "x"]),
                );
                format!("{key} in {map}")
            }
            6 => self
                .var_of(Ty::Bool)
                .unwrap_or_else(|| self.rng.pick(&["true", "false"]).to_string()),
            7 => self.numeric_mix(depth),
            8 => self.null_check(),
            9 => self.library_bool(depth),
            10 => {
                let list = self.str_list(depth + 1);
                let n = self.rng.below(4);
                let op = self.rng.pick(&["<", "==", ">="]);
                format!("size({list}) {op} {n}")
            }
            11 => {
                if self.variables_visible && !self.variables.is_empty() && self.rng.chance(70) {
                    let (name, _) = self.rng.pick(&self.variables).clone();
                    format!("has(variables.{name})")
                } else {
                    let s = self.string(depth + 1);
                    let list = self.str_list(depth + 1);
                    format!("{s} in {list}")
                }
            }
            12..=16 if self.rng.chance(25) => self.two_variable_comprehension(depth),
            12..=16 => {
                let macro_name = self
                    .rng
                    .pick(&["all", "exists", "exists_one", "all", "exists"]);
                let (list, name, body) = self.comprehension(depth);
                format!("{list}.{macro_name}({name}, {body})")
            }
            17 | 18 => {
                let (a, b) = (self.bool(depth + 1), self.bool(depth + 1));
                let op = self.rng.pick(&["&&", "||"]);
                format!("({a}) {op} ({b})")
            }
            19 => format!("!({})", self.bool(depth + 1)),
            20 => {
                let (c, a, b) = (
                    self.bool(depth + 1),
                    self.bool(depth + 1),
                    self.bool(depth + 1),
                );
                format!("({c}) ? ({a}) : ({b})")
            }
            21 => {
                let l = self.str_list(depth + 1);
                let r = self.str_list(depth + 1);
                let f = self
                    .rng
                    .pick(&["sets.contains", "sets.intersects", "sets.equivalent"]);
                format!("{f}({l}, {r})")
            }
            22 => {
                let l = if self.rng.chance(50) {
                    self.int_list(depth + 1)
                } else {
                    self.str_list(depth + 1)
                };
                format!("{l}.isSorted()")
            }
            23 => {
                let key = quote(self.rng.pick(&["team", "app", "mode", "missing"]));
                let map = self.str_map(depth + 1);
                let s = self.string(depth + 1);
                format!("{map}[?{key}].orValue('') == {s}")
            }
            24 => {
                // cel.bind
                let s = self.string(depth + 1);
                format!("optional.of({s}).hasValue()")
            }
            25 => {
                let (list, name, body) = self.comprehension(depth);
                let n = self.rng.below(3);
                format!("size({list}.filter({name}, {body})) > {n}")
            }
            26 if self.params => {
                let key = quote(self.rng.pick(&["team", "prefix", "forbidden", "nothere"]));
                let s = self.string(depth + 1);
                format!("params.data[?{key}].orValue('none') != {s}")
            }
            27 => {
                let map = self.str_map(depth + 1);
                let f = self.rng.pick(&["all", "exists"]);
                let k = self.fresh();
                format!("{map}.{f}({k}, {k}.startsWith('a') || {k}.contains('/'))")
            }
            _ => {
                let (a, b) = (self.int(depth + 1), self.int(depth + 1));
                format!("{a} > {b}")
            }
        }
    }

    fn has(&mut self) -> String {
        let mut options = vec![
            "has(object.metadata.labels)".to_owned(),
            "has(object.metadata.annotations)".to_owned(),
            "has(object.metadata.labels.team)".to_owned(),
            "has(object.spec)".to_owned(),
        ];
        match self.kind {
            Kind::Deployment => options.extend([
                "has(object.spec.minReadySeconds)".to_owned(),
                "has(object.spec.template.spec.hostNetwork)".to_owned(),
                "has(object.spec.template.spec.nodeSelector)".to_owned(),
            ]),
            Kind::Pod => options.extend([
                "has(object.spec.priority)".to_owned(),
                "has(object.spec.serviceAccountName)".to_owned(),
                "has(object.spec.nodeSelector)".to_owned(),
            ]),
            Kind::Service => options.push("has(object.spec.type)".to_owned()),
            Kind::ConfigMap => options.extend([
                "has(object.data)".to_owned(),
                "has(object.data.mode)".to_owned(),
            ]),
        }
        if let Some(c) = self.elem(Elem::Container) {
            options.extend([
                format!("has({c}.resources)"),
                format!("has({c}.ports)"),
                format!("has({c}.securityContext)"),
                format!("has({c}.resources.limits)"),
            ]);
        }
        self.rng.pick(&options).clone()
    }

    fn null_check(&mut self) -> String {
        let options = [
            "object.metadata.?annotations.orValue(null) == null",
            "object.metadata.?labels.orValue(null) != null",
            "null == null",
            "object.spec.?nodeName.orValue(null) == null",
            "oldObject == null",
            "object.?data.orValue(null) == null",
        ];
        self.rng.pick(&options).to_string()
    }

    /// int vs uint vs double.
    fn numeric_mix(&mut self, depth: usize) -> String {
        let i = self.int(depth + 1);
        match self.rng.below(7) {
            0 => format!("uint({i}) >= 2u"),
            1 => format!("double({i}) / 2.0 > 1.5"),
            2 => format!("dyn({i}) == 1u"),
            3 => format!("{i} < 2.5"),
            4 => format!("{i} + 1 == int(2.0 + 1.0)"),
            5 => format!("dyn(double({i})) == {i}"),
            _ => format!("int(uint({i}) * 2u) > 3"),
        }
    }

    fn library_bool(&mut self, depth: usize) -> String {
        let s = self.string(depth + 1);
        match self.rng.below(16) {
            0 => format!("isQuantity({s})"),
            1 => {
                let (a, b) = (
                    quote(self.rng.pick(&QUANTITIES)),
                    quote(self.rng.pick(&QUANTITIES)),
                );
                format!("quantity({a}).isGreaterThan(quantity({b}))")
            }
            2 => format!("isURL({s})"),
            3 => format!("isIP({s})"),
            4 => format!("isCIDR({s})"),
            5 => format!("cidr('10.0.0.0/8').containsIP({s})"),
            6 => format!("isSemver({s})"),
            7 => format!(
                "semver('1.2.3').isLessThan(semver({}))",
                quote(self.rng.pick(&["1.10.0", "1.2.3", "0.9.9"]))
            ),
            8 => format!("!format.dns1123Label().validate({s}).hasValue()"),
            9 => format!("format.dns1123Subdomain().validate({s}).hasValue()"),
            10 => format!(
                "ip({}).isLoopback()",
                quote(self.rng.pick(&["127.0.0.1", "10.0.0.1", "::1"]))
            ),
            11 => format!(
                "quantity({}).isInteger()",
                quote(self.rng.pick(&QUANTITIES))
            ),
            12 => format!("{s}.find('[0-9]+') != ''"),
            13 => format!("size({s}.findAll('[a-z]')) > 2"),
            14 => format!("url('https://example.com:8443/a?b=c').getPort() == {s}"),
            _ => format!("isQuantity({s}) && quantity({s}).isGreaterThan(quantity('0'))"),
        }
    }

    // ---- int
    pub fn int(&mut self, depth: usize) -> String {
        let leaf = depth >= 3;
        let choice = if leaf {
            self.rng.below(5)
        } else {
            self.rng.below(16)
        };
        match choice {
            0 => self.rng.below(6).to_string(),
            1 | 2 => self.int_field(),
            3 => self
                .var_of(Ty::Int)
                .unwrap_or_else(|| self.rng.below(10).to_string()),
            4 => match self.elem(Elem::Int) {
                Some(x) => x,
                None => format!("size({})", self.string(depth + 1)),
            },
            5 => format!("size({})", self.str_list(depth + 1)),
            6 => format!("size({})", self.string(depth + 1)),
            7 => {
                let (a, b) = (self.int(depth + 1), self.int(depth + 1));
                let op = self.rng.pick(&["+", "-", "*"]);
                format!("({a} {op} {b})")
            }
            8 => {
                let a = self.int(depth + 1);
                let (op, k) = (self.rng.pick(&["/", "%"]), 1 + self.rng.below(4));
                format!("({a} {op} {k})")
            }
            9 => format!("{}.sum()", self.int_list(depth + 1)),
            10 => format!(
                "[int({}), int({})].max()",
                self.int(depth + 1),
                self.int(depth + 1)
            ),
            11 => format!("{}.indexOf('e')", self.string(depth + 1)),
            12 => {
                let list = self.int_list(depth + 1);
                format!("{list}.{}()", self.rng.pick(&["min", "max"]))
            }
            13 => format!(
                "semver({}).major()",
                quote(self.rng.pick(&["1.2.3", "2.0.0", "1.x"]))
            ),
            14 => format!(
                "quantity({}).asInteger()",
                quote(self.rng.pick(&QUANTITIES))
            ),
            _ if self.params => "int(params.data.maxReplicas)".to_owned(),
            _ => format!("int({})", quote(self.rng.pick(&["3", "12", "-4"]))),
        }
    }

    fn int_field(&mut self) -> String {
        if let Some(c) = self.elem(Elem::Container)
            && self.rng.chance(50)
        {
            return self
                .rng
                .pick(&[
                    format!("{c}.?ports[?0].?containerPort.orValue(0)"),
                    format!("{c}.ports[0].containerPort"),
                    format!("size({c}.name)"),
                ])
                .clone();
        }
        if let Some(p) = self.elem(Elem::Port)
            && self.rng.chance(50)
        {
            return format!("{p}.port");
        }
        let options: &[&str] = match self.kind {
            Kind::Deployment => &[
                "object.spec.replicas",
                "object.spec.?minReadySeconds.orValue(0)",
                "object.spec.minReadySeconds",
                "object.spec.template.spec.terminationGracePeriodSeconds",
                "size(object.spec.template.spec.containers)",
            ],
            Kind::Pod => &[
                "object.spec.?priority.orValue(0)",
                "object.spec.priority",
                "size(object.spec.containers)",
                "object.spec.terminationGracePeriodSeconds",
            ],
            Kind::Service => &[
                "object.spec.ports[0].port",
                "size(object.spec.ports)",
                "object.spec.ports[0].targetPort",
            ],
            Kind::ConfigMap => &[
                "size(object.?data.orValue({}))",
                "int(object.data.replicas)",
                "size(object.metadata.name)",
            ],
        };
        self.rng.pick(options).to_string()
    }

    // ---- string
    pub fn string(&mut self, depth: usize) -> String {
        let leaf = depth >= 3;
        let choice = if leaf {
            self.rng.below(6)
        } else {
            self.rng.below(21)
        };
        match choice {
            0 => quote(self.rng.pick(&WORDS)),
            1 | 2 => self.string_field(),
            3 => self
                .var_of(Ty::Str)
                .unwrap_or_else(|| "object.metadata.name".to_owned()),
            4 => match self.elem(Elem::Str) {
                Some(x) => x,
                None => "object.metadata.namespace".to_owned(),
            },
            5 => {
                let key = quote(
                    self.rng
                        .pick(&["team", "app", "example.com/tier", "absent"]),
                );
                let default = quote(self.rng.pick(&WORDS));
                match self.rng.below(3) {
                    0 => format!("object.metadata.?labels[?{key}].orValue({default})"),
                    1 => format!("object.metadata.labels[{key}]"),
                    _ => format!("object.metadata.?annotations[?'owner'].orValue({default})"),
                }
            }
            6 => format!("{}.lowerAscii()", self.string(depth + 1)),
            7 => format!("{}.upperAscii()", self.string(depth + 1)),
            8 => format!(
                "({} + '-' + {})",
                self.string(depth + 1),
                self.string(depth + 1)
            ),
            9 => format!("{}.replace('e', 'E')", self.string(depth + 1)),
            10 => format!(
                "{}.substring(0, {})",
                self.string(depth + 1),
                self.rng.below(5)
            ),
            11 => format!("string({})", self.int(depth + 1)),
            12 => format!("{}.split(':')[0]", self.string(depth + 1)),
            13 => format!("{}.join(',')", self.str_list(depth + 1)),
            14 => format!(
                "(({}) ? {} : {})",
                self.bool(depth + 1),
                self.string(depth + 1),
                self.string(depth + 1)
            ),
            15 => format!(
                "'%s/%d'.format([{}, {}])",
                self.string(depth + 1),
                self.int(depth + 1)
            ),
            16 => format!("{}.trim()", self.string(depth + 1)),
            17 => format!("{}.charAt(1)", self.string(depth + 1)),
            18 if self.params => {
                let key = quote(self.rng.pick(&["team", "prefix", "forbidden"]));
                format!("params.data[{key}]")
            }
            18 => format!(
                "url({}).getHost()",
                quote(self.rng.pick(&[
                    "https://example.com:8443/a",
                    "http://[::1]/x",
                    "/relative"
                ]))
            ),
            19 => self
                .rng
                .pick(&[
                    "request.kind.kind",
                    "request.resource.resource",
                    "request.resource.group",
                    "request.namespace",
                    "request.name",
                    "request.operation",
                    "request.?subResource.orValue('none')",
                ])
                .to_string(),
            _ => format!("string({})", self.numeric_literal()),
        }
    }

    fn numeric_literal(&mut self) -> String {
        self.rng
            .pick(&["1u", "2.5", "-0.0", "3", "1e3", "0.1"])
            .to_string()
    }

    fn string_field(&mut self) -> String {
        if let Some(c) = self.elem(Elem::Container)
            && self.rng.chance(60)
        {
            return self
                .rng
                .pick(&[
                    format!("{c}.name"),
                    format!("{c}.image"),
                    format!("{c}.imagePullPolicy"),
                    format!("{c}.?resources.?limits[?'memory'].orValue('0')"),
                    format!("{c}.resources.limits.cpu"),
                    format!("{c}.?env[?0].?value.orValue('none')"),
                ])
                .clone();
        }
        if let Some(p) = self.elem(Elem::Port)
            && self.rng.chance(50)
        {
            return self
                .rng
                .pick(&[format!("{p}.name"), format!("{p}.protocol")])
                .clone();
        }
        let options: &[&str] = match self.kind {
            Kind::Deployment => &[
                "object.metadata.name",
                "object.spec.template.spec.containers[0].image",
                "object.spec.template.spec.?serviceAccountName.orValue('default')",
                "object.spec.strategy.type",
                "object.spec.template.spec.restartPolicy",
                "object.spec.template.spec.?nodeSelector[?'disk'].orValue('any')",
            ],
            Kind::Pod => &[
                "object.metadata.name",
                "object.spec.containers[0].image",
                "object.spec.?serviceAccountName.orValue('default')",
                "object.spec.dnsPolicy",
                "object.spec.schedulerName",
            ],
            Kind::Service => &[
                "object.metadata.name",
                "object.spec.type",
                "object.spec.ports[0].protocol",
                "object.spec.sessionAffinity",
            ],
            Kind::ConfigMap => &[
                "object.metadata.name",
                "object.?data.?mode.orValue('unset')",
                "object.data.mode",
                "object.?data.?endpoint.orValue('')",
                "object.?data.?list.orValue('')",
            ],
        };
        self.rng.pick(options).to_string()
    }

    // ---- lists and maps
    pub fn str_list(&mut self, depth: usize) -> String {
        let leaf = depth >= 3;
        let choice = if leaf {
            self.rng.below(3)
        } else {
            self.rng.below(9)
        };
        match choice {
            0 => format!(
                "[string({}), string({})]",
                quote(self.rng.pick(&WORDS)),
                quote(self.rng.pick(&WORDS))
            ),
            1 => match self.kind.containers() {
                Some(path) => format!("{path}.map(c, c.{})", self.rng.pick(&["name", "image"])),
                None => "[object.metadata.?labels[?'app'].orValue('none'), object.metadata.?labels[?'team'].orValue('none')]".to_owned(),
            },
            2 => self.var_of(Ty::StrList).unwrap_or_else(|| "[]".to_owned()),
            3 => format!("{}.split(',')", self.string(depth + 1)),
            4 => format!(
                "[string({}), string({})]",
                self.string(depth + 1),
                self.string(depth + 1)
            ),
            5 if self.rng.chance(30) => self.transform_list(depth),
            5 => {
                let (list, name, body) = self.comprehension(depth);
                if list == "object.spec.ports" {
                    format!("{list}.filter({name}, {body}).map({name}, {name}.name)")
                } else if list.ends_with(".containers") {
                    format!("{list}.filter({name}, {body}).map({name}, {name}.image)")
                } else {
                    format!("{list}.map({name}, string({name}))")
                }
            }
            6 => format!(
                "({} + {})",
                self.str_list(depth + 1),
                self.str_list(depth + 1)
            ),
            7 => "[object.metadata.?labels[?'app'].orValue('none'), object.metadata.?labels[?'team'].orValue('none')]".to_owned(),
            _ => format!("{}.filter(s, s != '')", self.str_list(depth + 1)),
        }
    }

    pub fn int_list(&mut self, depth: usize) -> String {
        let choice = if depth >= 3 {
            self.rng.below(2)
        } else {
            self.rng.below(6)
        };
        match choice {
            0 => format!(
                "[{}, {}, {}]",
                self.rng.below(5),
                self.rng.below(5),
                self.rng.below(5)
            ),
            1 => self
                .var_of(Ty::IntList)
                .unwrap_or_else(|| "[3, 1, 2]".to_owned()),
            2 => match (self.kind, self.kind.containers()) {
                (Kind::Service, _) => "object.spec.ports.map(p, p.port)".to_owned(),
                (_, Some(path)) => format!("{path}.map(c, size(c.name) + size(c.image))"),
                _ => "[size(object.metadata.name)]".to_owned(),
            },
            3 => format!(
                "[int({}), int({})]",
                self.int(depth + 1),
                self.int(depth + 1)
            ),
            4 => format!("{}.map(s, size(s))", self.str_list(depth + 1)),
            _ => format!("{}.filter(n, n % 2 == 0)", self.int_list(depth + 1)),
        }
    }

    pub fn str_map(&mut self, depth: usize) -> String {
        match self.rng.below(if depth >= 3 { 3 } else { 6 }) {
            0 => "object.metadata.?labels.orValue({})".to_owned(),
            1 => "object.metadata.labels".to_owned(),
            2 => self
                .var_of(Ty::StrMap)
                .unwrap_or_else(|| "{'app': 'web'}".to_owned()),
            3 if self.params => "params.data".to_owned(),
            3 => "object.metadata.?annotations.orValue({})".to_owned(),
            4 => format!(
                "{{'team': string({}), 'app': 'web'}}",
                self.string(depth + 1)
            ),
            5 if depth < 3 && self.rng.chance(40) => {
                if self.rng.chance(50) {
                    self.transform_map(depth)
                } else {
                    self.transform_map_entry(depth)
                }
            }
            _ => match self.kind {
                Kind::ConfigMap => "object.?data.orValue({})".to_owned(),
                Kind::Deployment => "object.spec.template.metadata.labels".to_owned(),
                _ => "object.metadata.?annotations.orValue({})".to_owned(),
            },
        }
    }
}

// ------------------------------------------------------------------------------------------
// Policies

/// A generated policy set for one kind and its bookkeeping.
pub struct PolicySet {
    /// Policies, bindings (and nothing else), as JSON documents.
    pub documents: Vec<Value>,
    /// Validations (and mutations) per object this set judges: the cases it contributes.
    pub cases_per_object: usize,
}

fn variables(g: &mut Grammar<'_>, count: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..count {
        let ty = g.any_type();
        let expression = g.expr(ty, 1);
        out.push(json!({"name": format!("v{i}"), "expression": expression}));
        g.variables.push((format!("v{i}"), ty));
    }
    out
}

fn match_conditions(g: &mut Grammar<'_>) -> Vec<Value> {
    g.variables_visible = false;
    let count = if g.rng.chance(35) {
        1 + g.rng.below(2)
    } else {
        0
    };
    let conditions = (0..count)
        .map(|i| json!({"name": format!("condition-{i}"), "expression": g.bool(2)}))
        .collect();
    g.variables_visible = true;
    conditions
}

fn constraints(kind: Kind) -> Value {
    json!({"resourceRules": [{
        "apiGroups": [kind.group()], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": [kind.resource()],
    }]})
}

fn object_selector(round: u64, group: Option<usize>, mutate: bool) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(ROUND_LABEL.into(), json!(round.to_string()));
    if let Some(group) = group {
        labels.insert(GROUP_LABEL.into(), json!(format!("g{group}")));
    }
    let expression = if mutate {
        json!({"key": GROUP_LABEL, "operator": "In", "values": ["mutate"]})
    } else {
        json!({"key": GROUP_LABEL, "operator": "NotIn", "values": ["mutate", "probe"]})
    };
    json!({"matchLabels": labels, "matchExpressions": [expression]})
}

/// The actions of a binding: Deny for the group's denying policy, else Warn (with or without
/// Audit), or Audit alone now and then.
#[derive(Clone, Copy)]
pub enum Actions {
    Deny,
    Warn,
}

/// One ValidatingAdmissionPolicy with its binding.
pub fn validating_policy(
    rng: &mut Rng,
    kind: Kind,
    name: &str,
    round: u64,
    actions: Actions,
    group: Option<usize>,
) -> PolicySet {
    let params = rng.chance(30);
    let failure_policy = if rng.chance(70) { "Fail" } else { "Ignore" };
    let mut g = Grammar::new(rng, kind, params);
    let conditions = match_conditions(&mut g);
    let variable_count = g.rng.below(5);
    let variables = variables(&mut g, variable_count);
    let count = match actions {
        Actions::Deny => 2 + g.rng.below(5),
        Actions::Warn => 6 + g.rng.below(12),
    };
    let mut validations = Vec::new();
    for i in 0..count {
        let mut validation = json!({"expression": g.bool(0)});
        match g.rng.below(4) {
            0 => validation["message"] = json!(format!("{name} rule {i} failed")),
            1 => validation["messageExpression"] = json!(format!("'rule {i}: ' + {}", g.string(2))),
            2 => {
                validation["message"] = json!(format!("static {i}"));
                validation["messageExpression"] = json!(format!("string({})", g.string(1)));
            }
            _ => {}
        }
        if g.rng.chance(25) {
            validation["reason"] =
                json!(
                    g.rng
                        .pick(&["Forbidden", "Invalid", "RequestEntityTooLarge"])
                );
        }
        validations.push(validation);
    }
    let audit_annotations: Vec<Value> = (0..if g.rng.chance(30) {
        1 + g.rng.below(2)
    } else {
        0
    })
        .map(|i| {
            let expression = if g.rng.chance(80) {
                format!("string({})", g.string(1))
            } else {
                "null".to_owned()
            };
            json!({"key": format!("note-{i}"), "valueExpression": expression})
        })
        .collect();
    let mut spec = json!({
        "failurePolicy": failure_policy,
        "matchConstraints": constraints(kind),
        "validations": validations,
    });
    if !conditions.is_empty() {
        spec["matchConditions"] = json!(conditions);
    }
    if !variables.is_empty() {
        spec["variables"] = json!(variables);
    }
    if !audit_annotations.is_empty() {
        spec["auditAnnotations"] = json!(audit_annotations);
    }
    if params {
        spec["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    }
    let binding_actions = match actions {
        Actions::Deny if rng.chance(30) => json!(["Deny", "Audit"]),
        Actions::Deny => json!(["Deny"]),
        Actions::Warn if rng.chance(30) => json!(["Warn", "Audit"]),
        Actions::Warn => json!(["Warn"]),
    };
    let mut binding_spec = json!({
        "policyName": name,
        "validationActions": binding_actions,
        "matchResources": {"objectSelector": object_selector(round, group, false)},
    });
    if params {
        binding_spec["paramRef"] =
            json!({"name": PARAMS, "namespace": NAMESPACE, "parameterNotFoundAction": "Deny"});
    }
    PolicySet {
        documents: vec![
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                   "metadata": {"name": name}, "spec": spec}),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                   "metadata": {"name": format!("{name}-binding")}, "spec": binding_spec}),
        ],
        cases_per_object: count + audit_annotations.len(),
    }
}

/// One MutatingAdmissionPolicy (several mutations) with its binding, for objects of the
/// `mutate` group of `kind`.
pub fn mutating_policy(rng: &mut Rng, kind: Kind, name: &str, round: u64) -> PolicySet {
    let params = rng.chance(30);
    let failure_policy = if rng.chance(70) { "Fail" } else { "Ignore" };
    let mut g = Grammar::new(rng, kind, params);
    let conditions = match_conditions(&mut g);
    let variable_count = g.rng.below(3);
    let variables = variables(&mut g, variable_count);
    let count = 1 + g.rng.below(3);
    let mutations: Vec<Value> = (0..count).map(|i| mutation(&mut g, i)).collect();
    let mut spec = json!({
        "failurePolicy": failure_policy,
        "reinvocationPolicy": if g.rng.chance(50) { "Never" } else { "IfNeeded" },
        "matchConstraints": constraints(kind),
        "mutations": mutations,
    });
    if !conditions.is_empty() {
        spec["matchConditions"] = json!(conditions);
    }
    if !variables.is_empty() {
        spec["variables"] = json!(variables);
    }
    let mut binding_spec = json!({
        "policyName": name,
        "matchResources": {"objectSelector": object_selector(round, None, true)},
    });
    if params {
        spec["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        binding_spec["paramRef"] =
            json!({"name": PARAMS, "namespace": NAMESPACE, "parameterNotFoundAction": "Deny"});
    }
    PolicySet {
        documents: vec![
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                   "metadata": {"name": name}, "spec": spec}),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                   "metadata": {"name": format!("{name}-binding")}, "spec": binding_spec}),
        ],
        cases_per_object: count,
    }
}

/// A string expression that is a valid label value or not (the apiserver then refuses the
/// object; both sides must say so).
fn label_value(g: &mut Grammar<'_>) -> String {
    match g.rng.below(4) {
        0 => quote(g.rng.pick(&["mutated", "yes", "1"])),
        1 => "object.metadata.name.substring(0, 3)".to_owned(),
        _ => format!(
            "({}).lowerAscii().replace(':', '-').replace('/', '-').replace('@', '-')",
            { g.string(2) }
        ),
    }
}

fn mutation(g: &mut Grammar<'_>, i: usize) -> Value {
    let key = format!("example.com/m{i}");
    let json_patch = |expression: String| json!({"patchType": "JSONPatch", "jsonPatch": {"expression": expression}});
    let apply = |expression: String| json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}});
    match (g.kind, g.rng.below(6)) {
        (_, 0) => {
            let value = label_value(g);
            json_patch(format!(
                "[JSONPatch{{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('{key}'), value: {value}}}]"
            ))
        }
        (_, 1) => {
            let value = label_value(g);
            apply(format!(
                "Object{{metadata: Object.metadata{{labels: {{'{key}': {value}}}}}}}"
            ))
        }
        (_, 2) => {
            let condition = g.bool(1);
            let value = g.string(2);
            json_patch(format!(
                "({condition}) ? [JSONPatch{{op: 'add', path: '/metadata/annotations', value: {{'{key}': {value}}}}}] : []"
            ))
        }
        (Kind::Deployment, 3) => {
            let n = g.rng.below(4);
            let condition = g.bool(1);
            json_patch(format!(
                "({condition}) ? [JSONPatch{{op: 'replace', path: '/spec/replicas', value: object.spec.replicas % 3 + {n}}}] : []"
            ))
        }
        (Kind::Deployment, 4) => {
            let image = quote(g.rng.pick(&IMAGES));
            apply(format!(
                "Object{{spec: Object.spec{{template: Object.spec.template{{spec: Object.spec.template.spec{{containers: object.spec.template.spec.containers.filter(c, c.image.endsWith(':latest') || !c.image.contains(':')).map(c, Object.spec.template.spec.containers{{name: c.name, image: {image}}})}}}}}}}}"
            ))
        }
        (Kind::Deployment, _) => apply(format!(
            "Object{{spec: Object.spec{{minReadySeconds: {}}}}}",
            g.rng.below(20)
        )),
        (_, 3 | 4) => {
            let value = g.string(2);
            apply(format!("Object{{data: {{'m{i}': {value}}}}}"))
        }
        _ => {
            let value = g.string(2);
            json_patch(format!(
                "has(object.data) ? [JSONPatch{{op: 'add', path: '/data/m{i}', value: {value}}}] : [JSONPatch{{op: 'add', path: '/data', value: {{'m{i}': {value}}}}}]"
            ))
        }
    }
}
