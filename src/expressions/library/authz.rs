//! `authorizer`: resource and path checks answered by an [`Authorizer`].

use super::*;

#[derive(Clone)]
pub(super) struct AuthorizerValue {
    pub(super) authorizer: Arc<dyn Authorizer>,
    pub(super) check: AuthorizationCheck,
    /// The resource of the admission request, for `authorizer.requestResource`.
    pub(super) request_resource: Option<AuthorizationCheck>,
}

impl std::fmt::Debug for AuthorizerValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Authorizer({:?})", self.check)
    }
}

impl PartialEq for AuthorizerValue {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authorizer, &other.authorizer) && self.check == other.check
    }
}

impl Eq for AuthorizerValue {}

impl Opaque for AuthorizerValue {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Authorizer"
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Decision(pub(super) AuthorizationDecision);

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The `authorizer` variable for `authorizer`.
pub(crate) fn authorizer_value(
    authorizer: Arc<dyn Authorizer>,
    request_resource: Option<AuthorizationCheck>,
) -> Box<dyn Val> {
    wrap(AuthorizerValue {
        authorizer,
        check: AuthorizationCheck::default(),
        request_resource,
    })
    .try_into()
    .expect("an opaque value converts")
}

pub(super) fn authz_member(function: &str, args: &[Value]) -> Fallible {
    if let Some(Decision(d)) = args.first().and_then(opaque::<Decision>) {
        return match function {
            "allowed" => Ok(Value::Bool(d.allowed)),
            "reason" => Ok(Value::String(Arc::new(d.reason.clone()))),
            "errored" => Ok(Value::Bool(!d.error.is_empty())),
            "error" => Ok(Value::String(Arc::new(d.error.clone()))),
            _ => Err(no_overload(function, args)),
        };
    }
    let Some(a) = args.first().and_then(opaque::<AuthorizerValue>) else {
        return Err(no_overload(function, args));
    };
    let mut next = a.clone();
    let arg = str_arg(function, args, 1)?.to_owned();
    match function {
        "group" => next.check.group = arg,
        "resource" => next.check.resource = arg,
        "subresource" => next.check.subresource = arg,
        "namespace" => next.check.namespace = arg,
        "name" => next.check.name = arg,
        "path" => next.check.path = arg,
        "fieldSelector" | "labelSelector" => {
            crate::expressions::charge_cost(selector_units(&arg))?;
            if function == "fieldSelector" {
                next.check.field_selector = arg;
            } else {
                next.check.label_selector = arg;
            }
        }
        "serviceAccount" => {
            let name = str_arg(function, args, 2)?.to_owned();
            // As `authorizerServiceAccount` (k8s.io/apiserver pkg/cel/library/authz.go).
            if !crate::kubernetes::names::dns1123_subdomain_errors(&name).is_empty() {
                return Err(fail(function, "Invalid service account name"));
            }
            if !crate::kubernetes::names::dns1123_label_errors(&arg).is_empty() {
                return Err(fail(function, "Invalid service account namespace"));
            }
            next.check.service_account = Some((arg, name));
        }
        "check" => {
            // Its 350,000 units are charged by the cost pass (`cost.rs`).
            next.check.verb = arg;
            let decision = next
                .authorizer
                .authorize(&next.check)
                .map_err(|message| fail(function, message))?;
            return Ok(wrap(Decision(decision)));
        }
        _ => return Err(no_overload(function, args)),
    }
    Ok(wrap(next))
}

/// Kubernetes' units for parsing a field or label selector of `selector`'s length n
/// (`selectorCostEstimate` in k8s.io/apiserver pkg/cel/library/cost.go): a list (10), a
/// traversal (n / 10), and for each of up to n / 2 requirements a list and a struct (50), each
/// fraction rounded up.
fn selector_units(selector: &str) -> u64 {
    let length = selector.chars().count() as u64;
    10 + length.div_ceil(10) + 50 * length.div_ceil(2)
}

/// `authorizer.requestResource`: the authorizer, scoped to the request's group, resource,
/// subresource, namespace and name.
pub(super) fn request_resource(args: &[Value]) -> Fallible {
    let Some(a) = args.first().and_then(opaque::<AuthorizerValue>) else {
        return Err(no_overload("requestResource", args));
    };
    let Some(check) = a.request_resource.clone() else {
        return Err(fail(
            "requestResource",
            "no such key: requestResource (no request resource bound)",
        ));
    };
    Ok(wrap(AuthorizerValue { check, ..a.clone() }))
}
