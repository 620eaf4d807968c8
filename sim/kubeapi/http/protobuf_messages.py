"""Field tables of the protobuf messages the emulator decodes (see ``protobuf_decoder``).

Each table maps a field number to ``(json name, kind)``. Kinds: ``"string"``, ``"int"``,
``"bool"``, ``"bytes"`` (base64 in JSON), ``"quantity"`` (resource.Quantity),
``"int-or-string"``; a ``?`` suffix marks a Go pointer (kept when zero); ``("message", T)``,
``("message?", T)`` (a pointer: kept when empty), ``("repeated", kind)``,
``("map", value kind)``, and ``"skip"`` (read and ignored: server-owned fields such as status
and timestamps).

The numbers are those of the published ``generated.proto`` files of k8s.io/api and
k8s.io/apimachinery. The pod spec covers what kubectl's generators and common manifests
set; other fields are refused when present (see ``protobuf_decoder``).
"""

from __future__ import annotations

from typing import Any

Kind = str | tuple[str, Any]
Spec = dict[int, tuple[str, Kind]]

# -- apimachinery -------------------------------------------------------------------------------

OWNER_REFERENCE: Spec = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool?"),
    7: ("blockOwnerDeletion", "bool?"),
}
OBJECT_META: Spec = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    4: ("selfLink", "skip"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", "skip"),
    9: ("deletionTimestamp", "skip"),
    10: ("deletionGracePeriodSeconds", "skip"),
    11: ("labels", ("map", "string")),
    12: ("annotations", ("map", "string")),
    13: ("ownerReferences", ("repeated", ("message", OWNER_REFERENCE))),
    14: ("finalizers", ("repeated", "string")),
}
LABEL_SELECTOR: Spec = {
    1: ("matchLabels", ("map", "string")),
    2: (
        "matchExpressions",
        (
            "repeated",
            (
                "message",
                {
                    1: ("key", "string"),
                    2: ("operator", "string"),
                    3: ("values", ("repeated", "string")),
                },
            ),
        ),
    ),
}

# -- core/v1 ------------------------------------------------------------------------------------

LOCAL_OBJECT_REFERENCE: Spec = {1: ("name", "string")}
CONTAINER_PORT: Spec = {
    1: ("name", "string"),
    2: ("hostPort", "int"),
    3: ("containerPort", "int"),
    4: ("protocol", "string"),
    5: ("hostIP", "string"),
}
ENV_VAR: Spec = {1: ("name", "string"), 2: ("value", "string")}
RESOURCE_REQUIREMENTS: Spec = {
    1: ("limits", ("map", "quantity")),
    2: ("requests", ("map", "quantity")),
}
VOLUME_MOUNT: Spec = {
    1: ("name", "string"),
    2: ("readOnly", "bool"),
    3: ("mountPath", "string"),
    4: ("subPath", "string"),
}
CONTAINER: Spec = {
    1: ("name", "string"),
    2: ("image", "string"),
    3: ("command", ("repeated", "string")),
    4: ("args", ("repeated", "string")),
    5: ("workingDir", "string"),
    6: ("ports", ("repeated", ("message", CONTAINER_PORT))),
    7: ("env", ("repeated", ("message", ENV_VAR))),
    8: ("resources", ("message", RESOURCE_REQUIREMENTS)),
    9: ("volumeMounts", ("repeated", ("message", VOLUME_MOUNT))),
    13: ("terminationMessagePath", "string"),
    14: ("imagePullPolicy", "string"),
    16: ("stdin", "bool"),
    17: ("stdinOnce", "bool"),
    18: ("tty", "bool"),
    20: ("terminationMessagePolicy", "string"),
}
TOLERATION: Spec = {
    1: ("key", "string"),
    2: ("operator", "string"),
    3: ("value", "string"),
    4: ("effect", "string"),
    5: ("tolerationSeconds", "int?"),
}
POD_SPEC: Spec = {
    2: ("containers", ("repeated", ("message", CONTAINER))),
    3: ("restartPolicy", "string"),
    4: ("terminationGracePeriodSeconds", "int?"),
    5: ("activeDeadlineSeconds", "int?"),
    6: ("dnsPolicy", "string"),
    7: ("nodeSelector", ("map", "string")),
    8: ("serviceAccountName", "string"),
    9: ("serviceAccount", "string"),
    10: ("nodeName", "string"),
    11: ("hostNetwork", "bool"),
    12: ("hostPID", "bool"),
    13: ("hostIPC", "bool"),
    15: ("imagePullSecrets", ("repeated", ("message", LOCAL_OBJECT_REFERENCE))),
    16: ("hostname", "string"),
    17: ("subdomain", "string"),
    19: ("schedulerName", "string"),
    20: ("initContainers", ("repeated", ("message", CONTAINER))),
    21: ("automountServiceAccountToken", "bool?"),
    22: ("tolerations", ("repeated", ("message", TOLERATION))),
    24: ("priorityClassName", "string"),
    25: ("priority", "int?"),
    30: ("enableServiceLinks", "bool?"),
}
POD_TEMPLATE_SPEC: Spec = {
    1: ("metadata", ("message", OBJECT_META)),
    2: ("spec", ("message", POD_SPEC)),
}

# -- kinds --------------------------------------------------------------------------------------

DEPLOYMENT_SPEC: Spec = {
    1: ("replicas", "int?"),
    2: ("selector", ("message?", LABEL_SELECTOR)),
    3: ("template", ("message", POD_TEMPLATE_SPEC)),
    4: (
        "strategy",
        (
            "message",
            {
                1: ("type", "string"),
                2: (
                    "rollingUpdate",
                    (
                        "message?",
                        {
                            1: ("maxUnavailable", "int-or-string?"),
                            2: ("maxSurge", "int-or-string?"),
                        },
                    ),
                ),
            },
        ),
    ),
    5: ("minReadySeconds", "int"),
    6: ("revisionHistoryLimit", "int?"),
    7: ("paused", "bool"),
    9: ("progressDeadlineSeconds", "int?"),
}
JOB_SPEC: Spec = {
    1: ("parallelism", "int?"),
    2: ("completions", "int?"),
    3: ("activeDeadlineSeconds", "int?"),
    4: ("selector", ("message?", LABEL_SELECTOR)),
    5: ("manualSelector", "bool?"),
    6: ("template", ("message", POD_TEMPLATE_SPEC)),
    7: ("backoffLimit", "int?"),
    8: ("ttlSecondsAfterFinished", "int?"),
    9: ("completionMode", "string?"),
    10: ("suspend", "bool?"),
}
POLICY_RULE: Spec = {
    1: ("verbs", ("repeated", "string")),
    2: ("apiGroups", ("repeated", "string")),
    3: ("resources", ("repeated", "string")),
    4: ("resourceNames", ("repeated", "string")),
    5: ("nonResourceURLs", ("repeated", "string")),
}
SUBJECT: Spec = {
    1: ("kind", "string"),
    2: ("apiGroup", "string"),
    3: ("name", "string"),
    4: ("namespace", "string"),
}
ROLE_REF: Spec = {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")}
BINDING: Spec = {
    1: ("metadata", ("message", OBJECT_META)),
    2: ("subjects", ("repeated", ("message", SUBJECT))),
    3: ("roleRef", ("message", ROLE_REF)),
}
RBAC = "rbac.authorization.k8s.io/v1"
AUTHORIZATION = "authorization.k8s.io/v1"
ACCESS_ATTRIBUTES: Spec = {
    1: (
        "resourceAttributes",
        (
            "message?",
            {
                1: ("namespace", "string"),
                2: ("verb", "string"),
                3: ("group", "string"),
                4: ("version", "string"),
                5: ("resource", "string"),
                6: ("subresource", "string"),
                7: ("name", "string"),
            },
        ),
    ),
    2: ("nonResourceAttributes", ("message?", {1: ("path", "string"), 2: ("verb", "string")})),
}
SUBJECT_ACCESS_REVIEW: Spec = {
    1: ("metadata", ("message", OBJECT_META)),
    2: (
        "spec",
        (
            "message",
            {
                **ACCESS_ATTRIBUTES,
                3: ("user", "string"),
                4: ("groups", ("repeated", "string")),
                6: ("uid", "string"),
            },
        ),
    ),
    3: ("status", "skip"),
}
BOUND_OBJECT_REFERENCE: Spec = {
    1: ("kind", "string"),
    2: ("apiVersion", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
}

KINDS: dict[tuple[str, str], Spec] = {
    ("v1", "ConfigMap"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("data", ("map", "string")),
        3: ("binaryData", ("map", "bytes")),
        4: ("immutable", "bool?"),
    },
    ("v1", "Secret"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("data", ("map", "bytes")),
        3: ("type", "string"),
        4: ("stringData", ("map", "string")),
        5: ("immutable", "bool?"),
    },
    ("v1", "Namespace"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("spec", ("message", {1: ("finalizers", ("repeated", "string"))})),
        3: ("status", "skip"),
    },
    ("v1", "ServiceAccount"): {
        1: ("metadata", ("message", OBJECT_META)),
        3: ("imagePullSecrets", ("repeated", ("message", LOCAL_OBJECT_REFERENCE))),
        4: ("automountServiceAccountToken", "bool?"),
    },
    ("apps/v1", "Deployment"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("spec", ("message", DEPLOYMENT_SPEC)),
        3: ("status", "skip"),
    },
    ("batch/v1", "Job"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("spec", ("message", JOB_SPEC)),
        3: ("status", "skip"),
    },
    (RBAC, "Role"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("rules", ("repeated", ("message", POLICY_RULE))),
    },
    (RBAC, "ClusterRole"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("rules", ("repeated", ("message", POLICY_RULE))),
        3: (
            "aggregationRule",
            (
                "message?",
                {1: ("clusterRoleSelectors", ("repeated", ("message", LABEL_SELECTOR)))},
            ),
        ),
    },
    (AUTHORIZATION, "SelfSubjectAccessReview"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("spec", ("message", ACCESS_ATTRIBUTES)),
        3: ("status", "skip"),
    },
    (AUTHORIZATION, "SubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
    (AUTHORIZATION, "LocalSubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: ("status", "skip"),
    },
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: (
            "spec",
            (
                "message",
                {
                    1: ("audiences", ("repeated", "string")),
                    4: ("expirationSeconds", "int?"),
                    3: ("boundObjectRef", ("message?", BOUND_OBJECT_REFERENCE)),
                },
            ),
        ),
        3: ("status", "skip"),
    },
    ("authentication.k8s.io/v1", "TokenReview"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: (
            "spec",
            ("message", {1: ("token", "string"), 2: ("audiences", ("repeated", "string"))}),
        ),
        3: ("status", "skip"),
    },
    (RBAC, "RoleBinding"): BINDING,
    (RBAC, "ClusterRoleBinding"): BINDING,
    ("policy/v1", "PodDisruptionBudget"): {
        1: ("metadata", ("message", OBJECT_META)),
        2: (
            "spec",
            (
                "message",
                {
                    1: ("minAvailable", "int-or-string?"),
                    2: ("selector", ("message?", LABEL_SELECTOR)),
                    3: ("maxUnavailable", "int-or-string?"),
                    4: ("unhealthyPodEvictionPolicy", "string?"),
                },
            ),
        ),
        3: ("status", "skip"),
    },
}
