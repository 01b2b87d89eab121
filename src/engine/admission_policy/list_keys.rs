//! How structured-merge-diff merges each field of the built-in kinds that admission cares about:
//! which lists are associative (`x-kubernetes-list-type: map`) and by which keys, which are sets,
//! and which maps and structs are atomic.
//!
//! The table is derived from the SMD schema that `k8s.io/client-go` v0.37.2 embeds
//! (`applyconfigurations/internal/internal.go`), which is generated from the `+listType`,
//! `+listMapKey`, `+mapType` and `+structType` markers of `k8s.io/api` v0.37.2 (for example
//! `PodSpec.Containers`: `+listType=map`, `+listMapKey=name`; `PodSpec.Tolerations`:
//! `+listType=atomic`; `LabelSelector`: `+structType=atomic`).
//!
//! It is pruned: a field is listed when it (or something beneath it) merges differently from the
//! default, and every list and map-typed field of a listed struct is listed. What is not listed
//! is [`Shape::Unknown`]: maps (structs and map-typed fields) merge key by key, lists are atomic,
//! scalars are replaced. For the kinds in the table that default is exact (every non-atomic list
//! and every atomic map or struct beneath them is listed); for other kinds only `metadata` is
//! known. `status` is left out: admission policies mutate the object, not its status.
//!
//! A key's default is kept only when it is a real default (`protocol: TCP`); the zero values
//! that openapi-gen records for required fields (`name: ""`) are not defaults here, so an apply
//! configuration item without its `name` is an error rather than a new item named `""`.

use crate::admission::GroupVersionKind;

/// How a field merges.
#[derive(Debug, PartialEq, Eq)]
pub enum Shape {
    /// Not in the table: maps merge key by key, lists are atomic, scalars are replaced.
    Unknown,
    /// A scalar (the item of a set list).
    Scalar,
    /// A struct with named fields; fields not listed are [`Shape::Unknown`].
    Struct {
        /// `+structType=atomic`: replaced whole.
        atomic: bool,
        /// The listed fields, by JSON name, sorted.
        fields: &'static [(&'static str, &'static Shape)],
    },
    /// A map-typed field (`map[string]T`), such as `labels`.
    Map {
        /// `+mapType=atomic`: replaced whole.
        atomic: bool,
        /// The shape of every value.
        values: &'static Shape,
    },
    /// A list.
    List {
        /// How its items are told apart.
        kind: ListKind,
        /// The shape of every item.
        items: &'static Shape,
    },
}

/// How a list merges (`x-kubernetes-list-type`).
#[derive(Debug, PartialEq, Eq)]
pub enum ListKind {
    /// `atomic`: replaced whole.
    Atomic,
    /// `set`: scalars, unioned.
    Set,
    /// `map`: items are objects merged by their keys (`x-kubernetes-list-map-keys`).
    Map(&'static [ListKey]),
}

/// One key field of an associative list.
#[derive(Debug, PartialEq, Eq)]
pub struct ListKey {
    /// The field's JSON name.
    pub field: &'static str,
    /// The value an item without the field has for it (`TCP` for a port's `protocol`).
    pub default: Option<&'static str>,
}

impl Shape {
    /// The shape of field `name` of a value of this shape. A list's items are looked through,
    /// so `containers` then `env` is the `env` of every container.
    pub fn field(&'static self, name: &str) -> &'static Shape {
        match self {
            Shape::Struct { fields, .. } => fields
                .iter()
                .find(|(field, _)| *field == name)
                .map_or(&Shape::Unknown, |(_, shape)| *shape),
            Shape::Map { values, .. } => values,
            Shape::List { items, .. } => items.field(name),
            Shape::Unknown | Shape::Scalar => &Shape::Unknown,
        }
    }

    /// The shape of a list's items ([`Shape::Unknown`] for anything else).
    pub fn items(&'static self) -> &'static Shape {
        match self {
            Shape::List { items, .. } => items,
            _ => &Shape::Unknown,
        }
    }

    /// Whether values of this shape are replaced whole when they are objects or lists.
    pub fn is_atomic(&self) -> bool {
        match self {
            Shape::Struct { atomic, .. } | Shape::Map { atomic, .. } => *atomic,
            Shape::List { kind, .. } => *kind == ListKind::Atomic,
            Shape::Unknown | Shape::Scalar => false,
        }
    }
}

/// The shape of a whole object of kind `gvk`, looked up by group and kind (any version). Kinds
/// the table does not know get one that knows `metadata` only.
pub fn object_shape(gvk: &GroupVersionKind) -> &'static Shape {
    KINDS
        .iter()
        .find(|(group, kind, _)| *group == gvk.group && *kind == gvk.kind)
        .map_or(&OBJECT, |(_, _, shape)| *shape)
}

/// The shape at a dotted field path from the object root, such as
/// `spec.template.spec.containers.env` for a Deployment (list items are looked through).
pub fn shape_at(gvk: &GroupVersionKind, path: &str) -> &'static Shape {
    path.split('.')
        .filter(|segment| !segment.is_empty())
        .fold(object_shape(gvk), |shape, segment| shape.field(segment))
}

/// Any object of a kind not in [`KINDS`].
static OBJECT: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META)],
};

// ---- Generated from the client-go v0.37.2 SMD schema (see the module comment). ----

/// The kinds this table knows: (API group, kind, shape of the object).
static KINDS: &[(&str, &str, &Shape)] = &[
    ("", "Pod", &POD),
    ("", "PodTemplate", &POD_TEMPLATE),
    ("", "ReplicationController", &REPLICATION_CONTROLLER),
    ("", "Service", &SERVICE),
    ("apps", "Deployment", &DEPLOYMENT),
    ("apps", "ReplicaSet", &REPLICA_SET),
    ("apps", "StatefulSet", &STATEFUL_SET),
    ("apps", "DaemonSet", &DAEMON_SET),
    ("batch", "Job", &JOB),
    ("batch", "CronJob", &CRON_JOB),
    ("", "ConfigMap", &CONFIG_MAP),
    ("", "Secret", &SECRET),
    ("", "Namespace", &NAMESPACE),
    ("", "ServiceAccount", &SERVICE_ACCOUNT),
    ("", "PersistentVolumeClaim", &PERSISTENT_VOLUME_CLAIM),
    ("networking.k8s.io", "Ingress", &INGRESS),
];

/// `io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference`.
static OWNER_REFERENCE: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`.
static OBJECT_META: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "annotations",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        (
            "finalizers",
            &Shape::List {
                kind: ListKind::Set,
                items: &Shape::Scalar,
            },
        ),
        (
            "labels",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        (
            "managedFields",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "ownerReferences",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "uid",
                    default: None,
                }]),
                items: &OWNER_REFERENCE,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.NodeSelector`.
static NODE_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[(
        "nodeSelectorTerms",
        &Shape::List {
            kind: ListKind::Atomic,
            items: &Shape::Unknown,
        },
    )],
};

/// `io.k8s.api.core.v1.NodeAffinity`.
static NODE_AFFINITY: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "preferredDuringSchedulingIgnoredDuringExecution",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "requiredDuringSchedulingIgnoredDuringExecution",
            &NODE_SELECTOR,
        ),
    ],
};

/// `io.k8s.api.core.v1.Affinity`.
static AFFINITY: Shape = Shape::Struct {
    atomic: false,
    fields: &[("nodeAffinity", &NODE_AFFINITY)],
};

/// `io.k8s.api.core.v1.ConfigMapKeySelector`.
static CONFIG_MAP_KEY_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.ObjectFieldSelector`.
static OBJECT_FIELD_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.FileKeySelector`.
static FILE_KEY_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.ResourceFieldSelector`.
static RESOURCE_FIELD_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.SecretKeySelector`.
static SECRET_KEY_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.EnvVarSource`.
static ENV_VAR_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("configMapKeyRef", &CONFIG_MAP_KEY_SELECTOR),
        ("fieldRef", &OBJECT_FIELD_SELECTOR),
        ("fileKeyRef", &FILE_KEY_SELECTOR),
        ("resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        ("secretKeyRef", &SECRET_KEY_SELECTOR),
    ],
};

/// `io.k8s.api.core.v1.EnvVar`.
static ENV_VAR: Shape = Shape::Struct {
    atomic: false,
    fields: &[("valueFrom", &ENV_VAR_SOURCE)],
};

/// `io.k8s.api.core.v1.ContainerPort`.
static CONTAINER_PORT: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.core.v1.ResourceClaim`.
static RESOURCE_CLAIM: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.core.v1.ResourceRequirements`.
static RESOURCE_REQUIREMENTS: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "claims",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &RESOURCE_CLAIM,
            },
        ),
        (
            "limits",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        (
            "requests",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.VolumeDevice`.
static VOLUME_DEVICE: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.core.v1.VolumeMount`.
static VOLUME_MOUNT: Shape = Shape::Struct {
    atomic: false,
    fields: &[(
        "bindMountOptions",
        &Shape::List {
            kind: ListKind::Set,
            items: &Shape::Scalar,
        },
    )],
};

/// `io.k8s.api.core.v1.Container`.
static CONTAINER: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "args",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "command",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "env",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &ENV_VAR,
            },
        ),
        (
            "envFrom",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "ports",
            &Shape::List {
                kind: ListKind::Map(&[
                    ListKey {
                        field: "containerPort",
                        default: None,
                    },
                    ListKey {
                        field: "protocol",
                        default: Some("TCP"),
                    },
                ]),
                items: &CONTAINER_PORT,
            },
        ),
        (
            "resizePolicy",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("resources", &RESOURCE_REQUIREMENTS),
        (
            "restartPolicyRules",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "volumeDevices",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "devicePath",
                    default: None,
                }]),
                items: &VOLUME_DEVICE,
            },
        ),
        (
            "volumeMounts",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "mountPath",
                    default: None,
                }]),
                items: &VOLUME_MOUNT,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.EphemeralContainer`.
static EPHEMERAL_CONTAINER: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "args",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "command",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "env",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &ENV_VAR,
            },
        ),
        (
            "envFrom",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "ports",
            &Shape::List {
                kind: ListKind::Map(&[
                    ListKey {
                        field: "containerPort",
                        default: None,
                    },
                    ListKey {
                        field: "protocol",
                        default: Some("TCP"),
                    },
                ]),
                items: &CONTAINER_PORT,
            },
        ),
        (
            "resizePolicy",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("resources", &RESOURCE_REQUIREMENTS),
        (
            "restartPolicyRules",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "volumeDevices",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "devicePath",
                    default: None,
                }]),
                items: &VOLUME_DEVICE,
            },
        ),
        (
            "volumeMounts",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "mountPath",
                    default: None,
                }]),
                items: &VOLUME_MOUNT,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.EvictionResponder`.
static EVICTION_RESPONDER: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.HostAlias`.
static HOST_ALIAS: Shape = Shape::Struct {
    atomic: false,
    fields: &[(
        "hostnames",
        &Shape::List {
            kind: ListKind::Atomic,
            items: &Shape::Unknown,
        },
    )],
};

/// `io.k8s.api.core.v1.LocalObjectReference`.
static LOCAL_OBJECT_REFERENCE: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.PodResourceClaim`.
static POD_RESOURCE_CLAIM: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.core.v1.PodSchedulingGate`.
static POD_SCHEDULING_GATE: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector`.
static LABEL_SELECTOR: Shape = Shape::Struct {
    atomic: true,
    fields: &[
        (
            "matchExpressions",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "matchLabels",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.TopologySpreadConstraint`.
static TOPOLOGY_SPREAD_CONSTRAINT: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("labelSelector", &LABEL_SELECTOR),
        (
            "matchLabelKeys",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.CephFSVolumeSource`.
static CEPH_FS_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "monitors",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("secretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

/// `io.k8s.api.core.v1.CinderVolumeSource`.
static CINDER_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("secretRef", &LOCAL_OBJECT_REFERENCE)],
};

/// `io.k8s.api.core.v1.CSIVolumeSource`.
static CSI_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("nodePublishSecretRef", &LOCAL_OBJECT_REFERENCE),
        (
            "volumeAttributes",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.TypedLocalObjectReference`.
static TYPED_LOCAL_OBJECT_REFERENCE: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.PersistentVolumeClaimSpec`.
static PERSISTENT_VOLUME_CLAIM_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "accessModes",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("dataSource", &TYPED_LOCAL_OBJECT_REFERENCE),
        ("selector", &LABEL_SELECTOR),
    ],
};

/// `io.k8s.api.core.v1.PersistentVolumeClaimTemplate`.
static PERSISTENT_VOLUME_CLAIM_TEMPLATE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("metadata", &OBJECT_META),
        ("spec", &PERSISTENT_VOLUME_CLAIM_SPEC),
    ],
};

/// `io.k8s.api.core.v1.EphemeralVolumeSource`.
static EPHEMERAL_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("volumeClaimTemplate", &PERSISTENT_VOLUME_CLAIM_TEMPLATE)],
};

/// `io.k8s.api.core.v1.FlexVolumeSource`.
static FLEX_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "options",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        ("secretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

/// `io.k8s.api.core.v1.ISCSIVolumeSource`.
static ISCSI_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "portals",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("secretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

/// `io.k8s.api.core.v1.RBDVolumeSource`.
static RBD_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "monitors",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("secretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

/// `io.k8s.api.core.v1.ScaleIOVolumeSource`.
static SCALE_IO_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("secretRef", &LOCAL_OBJECT_REFERENCE)],
};

/// `io.k8s.api.core.v1.StorageOSVolumeSource`.
static STORAGE_OS_VOLUME_SOURCE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("secretRef", &LOCAL_OBJECT_REFERENCE)],
};

/// `io.k8s.api.core.v1.Volume`.
static VOLUME: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("cephfs", &CEPH_FS_VOLUME_SOURCE),
        ("cinder", &CINDER_VOLUME_SOURCE),
        ("csi", &CSI_VOLUME_SOURCE),
        ("ephemeral", &EPHEMERAL_VOLUME_SOURCE),
        ("flexVolume", &FLEX_VOLUME_SOURCE),
        ("iscsi", &ISCSI_VOLUME_SOURCE),
        ("rbd", &RBD_VOLUME_SOURCE),
        ("scaleIO", &SCALE_IO_VOLUME_SOURCE),
        ("storageos", &STORAGE_OS_VOLUME_SOURCE),
    ],
};

/// `io.k8s.api.core.v1.PodSpec`.
static POD_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("affinity", &AFFINITY),
        (
            "containers",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &CONTAINER,
            },
        ),
        (
            "ephemeralContainers",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &EPHEMERAL_CONTAINER,
            },
        ),
        (
            "evictionResponders",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &EVICTION_RESPONDER,
            },
        ),
        (
            "hostAliases",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "ip",
                    default: None,
                }]),
                items: &HOST_ALIAS,
            },
        ),
        (
            "imagePullSecrets",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &LOCAL_OBJECT_REFERENCE,
            },
        ),
        (
            "initContainers",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &CONTAINER,
            },
        ),
        (
            "nodeSelector",
            &Shape::Map {
                atomic: true,
                values: &Shape::Unknown,
            },
        ),
        (
            "overhead",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        (
            "readinessGates",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "resourceClaims",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &POD_RESOURCE_CLAIM,
            },
        ),
        ("resources", &RESOURCE_REQUIREMENTS),
        (
            "schedulingGates",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &POD_SCHEDULING_GATE,
            },
        ),
        (
            "tolerations",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "topologySpreadConstraints",
            &Shape::List {
                kind: ListKind::Map(&[
                    ListKey {
                        field: "topologyKey",
                        default: None,
                    },
                    ListKey {
                        field: "whenUnsatisfiable",
                        default: None,
                    },
                ]),
                items: &TOPOLOGY_SPREAD_CONSTRAINT,
            },
        ),
        (
            "volumes",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &VOLUME,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.Pod`.
static POD: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &POD_SPEC)],
};

/// `io.k8s.api.core.v1.PodTemplateSpec`.
static POD_TEMPLATE_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &POD_SPEC)],
};

/// `io.k8s.api.core.v1.PodTemplate`.
static POD_TEMPLATE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("template", &POD_TEMPLATE_SPEC)],
};

/// `io.k8s.api.core.v1.ReplicationControllerSpec`.
static REPLICATION_CONTROLLER_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "selector",
            &Shape::Map {
                atomic: true,
                values: &Shape::Unknown,
            },
        ),
        ("template", &POD_TEMPLATE_SPEC),
    ],
};

/// `io.k8s.api.core.v1.ReplicationController`.
static REPLICATION_CONTROLLER: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("metadata", &OBJECT_META),
        ("spec", &REPLICATION_CONTROLLER_SPEC),
    ],
};

/// `io.k8s.api.core.v1.ServicePort`.
static SERVICE_PORT: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.core.v1.ServiceSpec`.
static SERVICE_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "clusterIPs",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "externalIPs",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "ipFamilies",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "loadBalancerSourceRanges",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "ports",
            &Shape::List {
                kind: ListKind::Map(&[
                    ListKey {
                        field: "port",
                        default: None,
                    },
                    ListKey {
                        field: "protocol",
                        default: Some("TCP"),
                    },
                ]),
                items: &SERVICE_PORT,
            },
        ),
        (
            "selector",
            &Shape::Map {
                atomic: true,
                values: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.Service`.
static SERVICE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &SERVICE_SPEC)],
};

/// `io.k8s.api.apps.v1.DeploymentSpec`.
static DEPLOYMENT_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("selector", &LABEL_SELECTOR),
        ("template", &POD_TEMPLATE_SPEC),
    ],
};

/// `io.k8s.api.apps.v1.Deployment`.
static DEPLOYMENT: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &DEPLOYMENT_SPEC)],
};

/// `io.k8s.api.apps.v1.ReplicaSetSpec`.
static REPLICA_SET_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("selector", &LABEL_SELECTOR),
        ("template", &POD_TEMPLATE_SPEC),
    ],
};

/// `io.k8s.api.apps.v1.ReplicaSet`.
static REPLICA_SET: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &REPLICA_SET_SPEC)],
};

/// `io.k8s.api.apps.v1.StatefulSetSpec`.
static STATEFUL_SET_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("selector", &LABEL_SELECTOR),
        ("template", &POD_TEMPLATE_SPEC),
        (
            "volumeClaimTemplates",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.apps.v1.StatefulSet`.
static STATEFUL_SET: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &STATEFUL_SET_SPEC)],
};

/// `io.k8s.api.apps.v1.DaemonSetSpec`.
static DAEMON_SET_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("selector", &LABEL_SELECTOR),
        ("template", &POD_TEMPLATE_SPEC),
    ],
};

/// `io.k8s.api.apps.v1.DaemonSet`.
static DAEMON_SET: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &DAEMON_SET_SPEC)],
};

/// `io.k8s.api.scheduling.v1alpha3.WorkloadPodGroupResourceClaim`.
static WORKLOAD_POD_GROUP_RESOURCE_CLAIM: Shape = Shape::Struct {
    atomic: false,
    fields: &[],
};

/// `io.k8s.api.batch.v1.JobSchedulingConfiguration`.
static JOB_SCHEDULING_CONFIGURATION: Shape = Shape::Struct {
    atomic: false,
    fields: &[(
        "resourceClaims",
        &Shape::List {
            kind: ListKind::Map(&[ListKey {
                field: "name",
                default: None,
            }]),
            items: &WORKLOAD_POD_GROUP_RESOURCE_CLAIM,
        },
    )],
};

/// `io.k8s.api.batch.v1.JobSpec`.
static JOB_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("scheduling", &JOB_SCHEDULING_CONFIGURATION),
        ("selector", &LABEL_SELECTOR),
        ("template", &POD_TEMPLATE_SPEC),
    ],
};

/// `io.k8s.api.batch.v1.Job`.
static JOB: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &JOB_SPEC)],
};

/// `io.k8s.api.batch.v1.JobTemplateSpec`.
static JOB_TEMPLATE_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &JOB_SPEC)],
};

/// `io.k8s.api.batch.v1.CronJobSpec`.
static CRON_JOB_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[("jobTemplate", &JOB_TEMPLATE_SPEC)],
};

/// `io.k8s.api.batch.v1.CronJob`.
static CRON_JOB: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &CRON_JOB_SPEC)],
};

/// `io.k8s.api.core.v1.ConfigMap`.
static CONFIG_MAP: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "binaryData",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        (
            "data",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        ("metadata", &OBJECT_META),
    ],
};

/// `io.k8s.api.core.v1.Secret`.
static SECRET: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "data",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
        ("metadata", &OBJECT_META),
        (
            "stringData",
            &Shape::Map {
                atomic: false,
                values: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.Namespace`.
static NAMESPACE: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META)],
};

/// `io.k8s.api.core.v1.ObjectReference`.
static OBJECT_REFERENCE: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.core.v1.ServiceAccount`.
static SERVICE_ACCOUNT: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        (
            "imagePullSecrets",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        ("metadata", &OBJECT_META),
        (
            "secrets",
            &Shape::List {
                kind: ListKind::Map(&[ListKey {
                    field: "name",
                    default: None,
                }]),
                items: &OBJECT_REFERENCE,
            },
        ),
    ],
};

/// `io.k8s.api.core.v1.PersistentVolumeClaim`.
static PERSISTENT_VOLUME_CLAIM: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("metadata", &OBJECT_META),
        ("spec", &PERSISTENT_VOLUME_CLAIM_SPEC),
    ],
};

/// `io.k8s.api.networking.v1.ServiceBackendPort`.
static SERVICE_BACKEND_PORT: Shape = Shape::Struct {
    atomic: true,
    fields: &[],
};

/// `io.k8s.api.networking.v1.IngressServiceBackend`.
static INGRESS_SERVICE_BACKEND: Shape = Shape::Struct {
    atomic: false,
    fields: &[("port", &SERVICE_BACKEND_PORT)],
};

/// `io.k8s.api.networking.v1.IngressBackend`.
static INGRESS_BACKEND: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("resource", &TYPED_LOCAL_OBJECT_REFERENCE),
        ("service", &INGRESS_SERVICE_BACKEND),
    ],
};

/// `io.k8s.api.networking.v1.IngressSpec`.
static INGRESS_SPEC: Shape = Shape::Struct {
    atomic: false,
    fields: &[
        ("defaultBackend", &INGRESS_BACKEND),
        (
            "rules",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
        (
            "tls",
            &Shape::List {
                kind: ListKind::Atomic,
                items: &Shape::Unknown,
            },
        ),
    ],
};

/// `io.k8s.api.networking.v1.Ingress`.
static INGRESS: Shape = Shape::Struct {
    atomic: false,
    fields: &[("metadata", &OBJECT_META), ("spec", &INGRESS_SPEC)],
};
