"""Protobuf field tables of the built-in types the embedded cluster decodes from protobuf.

Derived from the Go struct tags of ``k8s.io/api`` (core/v1, apps/v1, batch/v1, rbac/v1,
coordination/v1) and ``k8s.io/apimachinery`` (meta/v1): for each message, its fields as
``NUMBER NAME TYPE`` separated by ``;``. ``NAME`` is the JSON name (``^`` for a struct Go
inlines into its parent, such as ``Volume``'s ``VolumeSource``). ``TYPE`` is

- a scalar: ``s`` string, ``i`` int32, ``l`` int64, ``b`` bool, ``y`` bytes;
- a special message: ``time`` (metav1.Time), ``microtime``, ``quantity``
  (resource.Quantity), ``intstr`` (intstr.IntOrString), ``raw`` (runtime.RawExtension),
  ``fieldsv1`` (metav1.FieldsV1);
- another message of this table by name;
- ``[T]`` for a repeated field, ``{K:V}`` for a map.

A suffix says how a zero value maps to JSON, as Go's ``encoding/json`` would write the Go
struct: ``?`` a pointer (present means set: kept even when zero), ``!`` a field without
``omitempty`` (kept), none: ``omitempty`` (a zero scalar is dropped). Non-pointer messages are
always kept (Go writes structs even when empty), except a zero ``time`` (Go writes ``null``).

``ROOTS`` maps ``(apiVersion, kind)`` of a ``runtime.Unknown`` envelope to its message
(``KIND_ROOTS`` the kind alone, for ``DeleteOptions``). Fields
of alpha API groups outside these packages (``JobSpec.scheduling``, field 17) are absent,
so their numbers are reported as unknown fields.
"""

from __future__ import annotations

ROOTS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("v1", "Pod"): "Pod",
    ("v1", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("v1", "Event"): "Event",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
    ("apps/v1", "DaemonSet"): "DaemonSet",
    ("apps/v1", "ControllerRevision"): "ControllerRevision",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
}
KIND_ROOTS: dict[str, str] = {"DeleteOptions": "DeleteOptions"}
"""Kinds registered in every group version: a typed client sends its own ``apiVersion``."""

MESSAGES: dict[str, str] = {
    "AWSElasticBlockStoreVolumeSource": "1 volumeID s!; 2 fsType s; 3 partition i; 4 readOnly b",
    "Affinity": (
        "1 nodeAffinity NodeAffinity?; 2 podAffinity PodAffinity?; "
        "3 podAntiAffinity PodAntiAffinity?"
    ),
    "AggregationRule": "1 clusterRoleSelectors [LabelSelector]",
    "AppArmorProfile": "1 type s!; 2 localhostProfile s?",
    "AzureDiskVolumeSource": (
        "1 diskName s!; 2 diskURI s!; 3 cachingMode s?; 4 fsType s?; 5 readOnly b?; 6 kind s?"
    ),
    "AzureFileVolumeSource": "1 secretName s!; 2 shareName s!; 3 readOnly b",
    "CSIVolumeSource": (
        "1 driver s!; 2 readOnly b?; 3 fsType s?; 4 volumeAttributes {s:s}; "
        "5 nodePublishSecretRef LocalObjectReference?"
    ),
    "Capabilities": "1 add [s]; 2 drop [s]",
    "CephFSVolumeSource": (
        "1 monitors [s]; 2 path s; 3 user s; 4 secretFile s; "
        "5 secretRef LocalObjectReference?; 6 readOnly b"
    ),
    "CinderVolumeSource": (
        "1 volumeID s!; 2 fsType s; 3 readOnly b; 4 secretRef LocalObjectReference?"
    ),
    "ClientIPConfig": "1 timeoutSeconds i?",
    "ClusterRole": (
        "1 metadata ObjectMeta; 2 rules [PolicyRule]; 3 aggregationRule AggregationRule?"
    ),
    "ClusterRoleBinding": "1 metadata ObjectMeta; 2 subjects [Subject]; 3 roleRef RoleRef",
    "ClusterTrustBundleProjection": (
        "1 name s?; 2 signerName s?; 3 labelSelector LabelSelector?; 5 optional b?; 4 path s!; "
        "6 user l?"
    ),
    "Condition": (
        "1 type s!; 2 status s!; 3 observedGeneration l; 4 lastTransitionTime time; "
        "5 reason s!; 6 message s!"
    ),
    "ConfigMap": "1 metadata ObjectMeta; 4 immutable b?; 2 data {s:s}; 3 binaryData {s:y}",
    "ConfigMapEnvSource": "1 ^ LocalObjectReference; 2 optional b?",
    "ConfigMapKeySelector": "1 ^ LocalObjectReference; 2 key s!; 3 optional b?",
    "ConfigMapProjection": "1 ^ LocalObjectReference; 2 items [KeyToPath]; 4 optional b?",
    "ConfigMapVolumeSource": (
        "1 ^ LocalObjectReference; 2 items [KeyToPath]; 3 defaultMode i?; 4 optional b?; "
        "5 defaultUser l?"
    ),
    "Container": (
        "1 name s!; 2 image s; 3 command [s]; 4 args [s]; 5 workingDir s; "
        "6 ports [ContainerPort]; 19 envFrom [EnvFromSource]; 7 env [EnvVar]; "
        "8 resources ResourceRequirements; 23 resizePolicy [ContainerResizePolicy]; "
        "24 restartPolicy s?; 25 restartPolicyRules [ContainerRestartRule]; "
        "9 volumeMounts [VolumeMount]; 21 volumeDevices [VolumeDevice]; "
        "10 livenessProbe Probe?; 11 readinessProbe Probe?; 22 startupProbe Probe?; "
        "12 lifecycle Lifecycle?; 13 terminationMessagePath s; 20 terminationMessagePolicy s; "
        "14 imagePullPolicy s; 15 securityContext SecurityContext?; 16 stdin b; "
        "17 stdinOnce b; 18 tty b"
    ),
    "ContainerExtendedResourceRequest": "1 containerName s!; 2 resourceName s!; 3 requestName s!",
    "ContainerPort": "1 name s; 2 hostPort i; 3 containerPort i!; 4 protocol s; 5 hostIP s",
    "ContainerResizePolicy": "1 resourceName s!; 2 restartPolicy s!",
    "ContainerRestartRule": "1 action s; 2 exitCodes ContainerRestartRuleOnExitCodes?",
    "ContainerRestartRuleOnExitCodes": "1 operator s; 2 values [i]",
    "ContainerState": (
        "1 waiting ContainerStateWaiting?; 2 running ContainerStateRunning?; "
        "3 terminated ContainerStateTerminated?"
    ),
    "ContainerStateRunning": "1 startedAt time",
    "ContainerStateTerminated": (
        "1 exitCode i!; 2 signal i; 3 reason s; 4 message s; 5 startedAt time; "
        "6 finishedAt time; 7 containerID s"
    ),
    "ContainerStateWaiting": "1 reason s; 2 message s",
    "ContainerStatus": (
        "1 name s!; 2 state ContainerState; 3 lastState ContainerState; 4 ready b!; "
        "5 restartCount i!; 6 image s!; 7 imageID s!; 8 containerID s; 9 started b?; "
        "10 allocatedResources {s:quantity}; 11 resources ResourceRequirements?; "
        "12 volumeMounts [VolumeMountStatus]; 13 user ContainerUser?; "
        "14 allocatedResourcesStatus [ResourceStatus]; 15 stopSignal s?"
    ),
    "ContainerUser": "1 linux LinuxContainerUser?",
    "ControllerRevision": "1 metadata ObjectMeta; 2 data raw; 3 revision l!",
    "CronJob": "1 metadata ObjectMeta; 2 spec CronJobSpec; 3 status CronJobStatus",
    "CronJobSpec": (
        "1 schedule s!; 8 timeZone s?; 2 startingDeadlineSeconds l?; 3 concurrencyPolicy s; "
        "4 suspend b?; 5 jobTemplate JobTemplateSpec; 6 successfulJobsHistoryLimit i?; "
        "7 failedJobsHistoryLimit i?"
    ),
    "CronJobStatus": (
        "1 active [ObjectReference]; 4 lastScheduleTime time?; 5 lastSuccessfulTime time?"
    ),
    "DaemonSet": "1 metadata ObjectMeta; 2 spec DaemonSetSpec; 3 status DaemonSetStatus",
    "DaemonSetCondition": (
        "1 type s!; 2 status s!; 3 lastTransitionTime time; 4 reason s; 5 message s"
    ),
    "DaemonSetSpec": (
        "1 selector LabelSelector?; 2 template PodTemplateSpec; "
        "3 updateStrategy DaemonSetUpdateStrategy; 4 minReadySeconds i; "
        "6 revisionHistoryLimit i?"
    ),
    "DaemonSetStatus": (
        "1 currentNumberScheduled i!; 2 numberMisscheduled i!; 3 desiredNumberScheduled i!; "
        "4 numberReady i!; 5 observedGeneration l; 6 updatedNumberScheduled i; "
        "7 numberAvailable i; 8 numberUnavailable i; 9 collisionCount i?; "
        "10 conditions [DaemonSetCondition]"
    ),
    "DaemonSetUpdateStrategy": "1 type s; 2 rollingUpdate RollingUpdateDaemonSet?",
    "Deployment": "1 metadata ObjectMeta; 2 spec DeploymentSpec; 3 status DeploymentStatus",
    "DeleteOptions": (
        "1 gracePeriodSeconds l?; 2 preconditions Preconditions?; 3 orphanDependents b?; "
        "4 propagationPolicy s?; 5 dryRun [s]; "
        "6 ignoreStoreReadErrorWithClusterBreakingPotential b?"
    ),
    "DeploymentCondition": (
        "1 type s!; 2 status s!; 6 lastUpdateTime time; 7 lastTransitionTime time; 4 reason s; "
        "5 message s"
    ),
    "DeploymentSpec": (
        "1 replicas i?; 2 selector LabelSelector?; 3 template PodTemplateSpec; "
        "4 strategy DeploymentStrategy; 5 minReadySeconds i; 6 revisionHistoryLimit i?; "
        "7 paused b; 9 progressDeadlineSeconds i?"
    ),
    "DeploymentStatus": (
        "1 observedGeneration l; 2 replicas i; 3 updatedReplicas i; 7 readyReplicas i; "
        "4 availableReplicas i; 5 unavailableReplicas i; 9 terminatingReplicas i?; "
        "6 conditions [DeploymentCondition]; 8 collisionCount i?"
    ),
    "DeploymentStrategy": "1 type s; 2 rollingUpdate RollingUpdateDeployment?",
    "DownwardAPIProjection": "1 items [DownwardAPIVolumeFile]",
    "DownwardAPIVolumeFile": (
        "1 path s!; 2 fieldRef ObjectFieldSelector?; "
        "3 resourceFieldRef ResourceFieldSelector?; 4 mode i?; 5 user l?"
    ),
    "DownwardAPIVolumeSource": (
        "1 items [DownwardAPIVolumeFile]; 2 defaultMode i?; 3 defaultUser l?"
    ),
    "EmptyDirVolumeSource": "1 medium s; 2 sizeLimit quantity?; 3 mode i?",
    "EnvFromSource": "1 prefix s; 2 configMapRef ConfigMapEnvSource?; 3 secretRef SecretEnvSource?",
    "EnvVar": "1 name s!; 2 value s; 3 valueFrom EnvVarSource?",
    "EnvVarSource": (
        "1 fieldRef ObjectFieldSelector?; 2 resourceFieldRef ResourceFieldSelector?; "
        "3 configMapKeyRef ConfigMapKeySelector?; 4 secretKeyRef SecretKeySelector?; "
        "5 fileKeyRef FileKeySelector?"
    ),
    "EphemeralContainer": "1 ^ EphemeralContainerCommon; 2 targetContainerName s",
    "EphemeralVolumeSource": "1 volumeClaimTemplate PersistentVolumeClaimTemplate?",
    "Event": (
        "1 metadata ObjectMeta; 2 involvedObject ObjectReference; 3 reason s; 4 message s; "
        "5 source EventSource; 6 firstTimestamp time; 7 lastTimestamp time; 8 count i; "
        "9 type s; 10 eventTime microtime; 11 series EventSeries?; 12 action s; "
        "13 related ObjectReference?; 14 reportingComponent s!; 15 reportingInstance s!"
    ),
    "EventSeries": "1 count i; 2 lastObservedTime microtime",
    "EventSource": "1 component s; 2 host s",
    "EvictionResponder": "1 name s!; 2 priority i?",
    "ExecAction": "1 command [s]",
    "FCVolumeSource": "1 targetWWNs [s]; 2 lun i?; 3 fsType s; 4 readOnly b; 5 wwids [s]",
    "FileKeySelector": "1 volumeName s!; 2 path s!; 3 key s!; 4 optional b?",
    "FlexVolumeSource": (
        "1 driver s!; 2 fsType s; 3 secretRef LocalObjectReference?; 4 readOnly b; 5 options {s:s}"
    ),
    "FlockerVolumeSource": "1 datasetName s; 2 datasetUUID s",
    "GCEPersistentDiskVolumeSource": "1 pdName s!; 2 fsType s; 3 partition i; 4 readOnly b",
    "GRPCAction": "1 port i!; 2 service s?; 3 mode s?",
    "GitRepoVolumeSource": "1 repository s!; 2 revision s; 3 directory s",
    "GlusterfsVolumeSource": "1 endpoints s!; 2 path s!; 3 readOnly b",
    "HTTPGetAction": (
        "1 path s; 2 port intstr; 3 host s; 4 scheme s; 5 httpHeaders [HTTPHeader]; 6 protocol s?"
    ),
    "HTTPHeader": "1 name s!; 2 value s!",
    "HostAlias": "1 ip s!; 2 hostnames [s]",
    "HostIP": "1 ip s!",
    "HostPathVolumeSource": "1 path s!; 2 type s?",
    "ISCSIVolumeSource": (
        "1 targetPortal s!; 2 iqn s!; 3 lun i!; 4 iscsiInterface s; 5 fsType s; 6 readOnly b; "
        "7 portals [s]; 8 chapAuthDiscovery b; 11 chapAuthSession b; "
        "10 secretRef LocalObjectReference?; 12 initiatorName s?"
    ),
    "ImageVolumeSource": "1 reference s; 2 pullPolicy s",
    "ImageVolumeStatus": "1 imageRef s",
    "Job": "1 metadata ObjectMeta; 2 spec JobSpec; 3 status JobStatus",
    "JobCondition": (
        "1 type s!; 2 status s!; 3 lastProbeTime time; 4 lastTransitionTime time; 5 reason s; "
        "6 message s"
    ),
    "JobSpec": (
        "1 parallelism i?; 2 completions i?; 3 activeDeadlineSeconds l?; "
        "11 podFailurePolicy PodFailurePolicy?; 16 successPolicy SuccessPolicy?; "
        "7 backoffLimit i?; 12 backoffLimitPerIndex i?; 13 maxFailedIndexes i?; "
        "4 selector LabelSelector?; 5 manualSelector b?; 6 template PodTemplateSpec; "
        "8 ttlSecondsAfterFinished i?; 9 completionMode s?; 10 suspend b?; "
        "14 podReplacementPolicy s?; 15 managedBy s?"
    ),
    "JobStatus": (
        "1 conditions [JobCondition]; 2 startTime time?; 3 completionTime time?; 4 active i; "
        "5 succeeded i; 6 failed i; 11 terminating i?; 7 completedIndexes s; "
        "10 failedIndexes s?; 8 uncountedTerminatedPods UncountedTerminatedPods?; 9 ready i?"
    ),
    "JobTemplateSpec": "1 metadata ObjectMeta; 2 spec JobSpec",
    "KeyToPath": "1 key s!; 2 path s!; 3 mode i?; 4 user l?",
    "LabelSelector": "1 matchLabels {s:s}; 2 matchExpressions [LabelSelectorRequirement]",
    "LabelSelectorRequirement": "1 key s!; 2 operator s!; 3 values [s]",
    "Lease": "1 metadata ObjectMeta; 2 spec LeaseSpec",
    "LeaseSpec": (
        "1 holderIdentity s?; 2 leaseDurationSeconds i?; 3 acquireTime microtime?; "
        "4 renewTime microtime?; 5 leaseTransitions i?; 6 strategy s?; 7 preferredHolder s?"
    ),
    "Lifecycle": "1 postStart LifecycleHandler?; 2 preStop LifecycleHandler?; 3 stopSignal s?",
    "LifecycleHandler": (
        "1 exec ExecAction?; 2 httpGet HTTPGetAction?; 3 tcpSocket TCPSocketAction?; "
        "4 sleep SleepAction?"
    ),
    "LinuxContainerUser": "1 uid l!; 2 gid l!; 3 supplementalGroups [l]",
    "LoadBalancerIngress": "1 ip s; 2 hostname s; 3 ipMode s?; 4 ports [PortStatus]",
    "LoadBalancerStatus": "1 ingress [LoadBalancerIngress]",
    "LocalObjectReference": "1 name s",
    "ManagedFieldsEntry": (
        "1 manager s; 2 operation s; 3 apiVersion s; 4 time time?; 6 fieldsType s; "
        "7 fieldsV1 fieldsv1?; 8 subresource s"
    ),
    "ModifyVolumeStatus": "1 targetVolumeAttributesClassName s; 2 status s!",
    "NFSVolumeSource": "1 server s!; 2 path s!; 3 readOnly b",
    "Namespace": "1 metadata ObjectMeta; 2 spec NamespaceSpec; 3 status NamespaceStatus",
    "NamespaceCondition": (
        "1 type s!; 2 status s!; 4 lastTransitionTime time; 5 reason s; 6 message s"
    ),
    "NamespaceSpec": "1 finalizers [s]",
    "NamespaceStatus": "1 phase s; 2 conditions [NamespaceCondition]",
    "NodeAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector?; "
        "2 preferredDuringSchedulingIgnoredDuringExecution [PreferredSchedulingTerm]"
    ),
    "NodeAllocatableMappedResources": "1 name s!; 2 quantity quantity?",
    "NodeAllocatableOverheadResources": "1 name s!; 2 perPod quantity?; 3 perContainer quantity?",
    "NodeAllocatableResourceClaimStatus": (
        "1 resourceClaimName s!; 2 containers [s]; 4 mapping [NodeAllocatableMappedResources]; "
        "5 overhead [NodeAllocatableOverheadResources]"
    ),
    "NodeSelector": "1 nodeSelectorTerms [NodeSelectorTerm]",
    "NodeSelectorRequirement": "1 key s!; 2 operator s!; 3 values [s]",
    "NodeSelectorTerm": (
        "1 matchExpressions [NodeSelectorRequirement]; 2 matchFields [NodeSelectorRequirement]"
    ),
    "ObjectFieldSelector": "1 apiVersion s; 2 fieldPath s!",
    "ObjectMeta": (
        "1 name s; 2 generateName s; 3 namespace s; 4 selfLink s; 5 uid s; "
        "6 resourceVersion s; 7 generation l; 8 creationTimestamp time; "
        "9 deletionTimestamp time?; 10 deletionGracePeriodSeconds l?; 11 labels {s:s}; "
        "12 annotations {s:s}; 13 ownerReferences [OwnerReference]; 14 finalizers [s]; "
        "17 managedFields [ManagedFieldsEntry]"
    ),
    "ObjectReference": (
        "1 kind s; 2 namespace s; 3 name s; 4 uid s; 5 apiVersion s; 6 resourceVersion s; "
        "7 fieldPath s"
    ),
    "OwnerReference": (
        "5 apiVersion s!; 1 kind s!; 3 name s!; 4 uid s!; 6 controller b?; 7 blockOwnerDeletion b?"
    ),
    "PersistentVolumeClaim": (
        "1 metadata ObjectMeta; 2 spec PersistentVolumeClaimSpec; "
        "3 status PersistentVolumeClaimStatus"
    ),
    "PersistentVolumeClaimCondition": (
        "1 type s!; 2 status s!; 3 lastProbeTime time; 4 lastTransitionTime time; 5 reason s; "
        "6 message s"
    ),
    "PersistentVolumeClaimSpec": (
        "1 accessModes [s]; 4 selector LabelSelector?; 2 resources VolumeResourceRequirements; "
        "3 volumeName s; 5 storageClassName s?; 6 volumeMode s?; "
        "7 dataSource TypedLocalObjectReference?; 8 dataSourceRef TypedObjectReference?; "
        "9 volumeAttributesClassName s?"
    ),
    "PersistentVolumeClaimStatus": (
        "1 phase s; 2 accessModes [s]; 3 capacity {s:quantity}; "
        "4 conditions [PersistentVolumeClaimCondition]; 5 allocatedResources {s:quantity}; "
        "7 allocatedResourceStatuses {s:s}; 8 currentVolumeAttributesClassName s?; "
        "9 modifyVolumeStatus ModifyVolumeStatus?; 10 healthStatus VolumeHealthStatus?"
    ),
    "PersistentVolumeClaimTemplate": "1 metadata ObjectMeta; 2 spec PersistentVolumeClaimSpec",
    "PersistentVolumeClaimVolumeSource": "1 claimName s!; 2 readOnly b",
    "PhotonPersistentDiskVolumeSource": "1 pdID s!; 2 fsType s",
    "Pod": "1 metadata ObjectMeta; 2 spec PodSpec; 3 status PodStatus",
    "PodAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm]; "
        "2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]"
    ),
    "PodAffinityTerm": (
        "1 labelSelector LabelSelector?; 2 namespaces [s]; 3 topologyKey s!; "
        "4 namespaceSelector LabelSelector?; 5 matchLabelKeys [s]; 6 mismatchLabelKeys [s]"
    ),
    "PodAntiAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm]; "
        "2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]"
    ),
    "PodCertificateProjection": (
        "1 signerName s; 2 keyType s; 3 maxExpirationSeconds i?; 4 credentialBundlePath s; "
        "5 keyPath s; 6 certificateChainPath s; 7 userAnnotations {s:s}; 8 user l?"
    ),
    "PodCondition": (
        "1 type s!; 7 observedGeneration l; 2 status s!; 3 lastProbeTime time; "
        "4 lastTransitionTime time; 5 reason s; 6 message s"
    ),
    "PodDNSConfig": "1 nameservers [s]; 2 searches [s]; 3 options [PodDNSConfigOption]",
    "PodDNSConfigOption": "1 name s; 2 value s?",
    "PodExtendedResourceClaimStatus": (
        "1 requestMappings [ContainerExtendedResourceRequest]; 2 resourceClaimName s!"
    ),
    "PodFailurePolicy": "1 rules [PodFailurePolicyRule]",
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName s?; 2 operator s!; 3 values [i]",
    "PodFailurePolicyOnPodConditionsPattern": "1 type s!; 2 status s!",
    "PodFailurePolicyRule": (
        "1 action s!; 2 onExitCodes PodFailurePolicyOnExitCodesRequirement?; "
        "3 onPodConditions [PodFailurePolicyOnPodConditionsPattern]"
    ),
    "PodIP": "1 ip s!",
    "PodOS": "1 name s!",
    "PodReadinessGate": "1 conditionType s!",
    "PodResourceClaim": "1 name s!; 3 resourceClaimName s?; 4 resourceClaimTemplateName s?",
    "PodResourceClaimStatus": "1 name s!; 2 resourceClaimName s?",
    "PodSchedulingGate": "1 name s!",
    "PodSchedulingGroup": "1 podGroupName s?",
    "PodSecurityContext": (
        "1 seLinuxOptions SELinuxOptions?; 8 windowsOptions WindowsSecurityContextOptions?; "
        "2 runAsUser l?; 6 runAsGroup l?; 3 runAsNonRoot b?; 4 supplementalGroups [l]; "
        "12 supplementalGroupsPolicy s?; 5 fsGroup l?; 7 sysctls [Sysctl]; "
        "9 fsGroupChangePolicy s?; 10 seccompProfile SeccompProfile?; "
        "11 appArmorProfile AppArmorProfile?; 13 seLinuxChangePolicy s?"
    ),
    "PodSpec": (
        "1 volumes [Volume]; 20 initContainers [Container]; 2 containers [Container]; "
        "34 ephemeralContainers [EphemeralContainer]; 3 restartPolicy s; "
        "4 terminationGracePeriodSeconds l?; 5 activeDeadlineSeconds l?; 6 dnsPolicy s; "
        "7 nodeSelector {s:s}; 8 serviceAccountName s; 9 serviceAccount s; "
        "21 automountServiceAccountToken b?; 10 nodeName s; 11 hostNetwork b; 12 hostPID b; "
        "13 hostIPC b; 27 shareProcessNamespace b?; 14 securityContext PodSecurityContext?; "
        "15 imagePullSecrets [LocalObjectReference]; 16 hostname s; 17 subdomain s; "
        "18 affinity Affinity?; 19 schedulerName s; 22 tolerations [Toleration]; "
        "23 hostAliases [HostAlias]; 24 priorityClassName s; 25 priority i?; "
        "26 dnsConfig PodDNSConfig?; 28 readinessGates [PodReadinessGate]; "
        "29 runtimeClassName s?; 30 enableServiceLinks b?; 31 preemptionPolicy s?; "
        "32 overhead {s:quantity}; 33 topologySpreadConstraints [TopologySpreadConstraint]; "
        "35 setHostnameAsFQDN b?; 36 os PodOS?; 37 hostUsers b?; "
        "38 schedulingGates [PodSchedulingGate]; 39 resourceClaims [PodResourceClaim]; "
        "40 resources ResourceRequirements?; 41 hostnameOverride s?; "
        "43 schedulingGroup PodSchedulingGroup?; 44 evictionResponders [EvictionResponder]"
    ),
    "PodStatus": (
        "17 observedGeneration l; 1 phase s; 2 conditions [PodCondition]; 3 message s; "
        "4 reason s; 11 nominatedNodeName s; 5 hostIP s; 16 hostIPs [HostIP]; 6 podIP s; "
        "12 podIPs [PodIP]; 7 startTime time?; 10 initContainerStatuses [ContainerStatus]; "
        "8 containerStatuses [ContainerStatus]; 9 qosClass s; "
        "13 ephemeralContainerStatuses [ContainerStatus]; 14 resize s; "
        "15 resourceClaimStatuses [PodResourceClaimStatus]; "
        "18 extendedResourceClaimStatus PodExtendedResourceClaimStatus?; "
        "19 allocatedResources {s:quantity}; 20 resources ResourceRequirements?; "
        "21 nodeAllocatableResourceClaimStatuses [NodeAllocatableResourceClaimStatus]; "
        "22 volumeHealth [PodVolumeHealth]"
    ),
    "PodTemplateSpec": "1 metadata ObjectMeta; 2 spec PodSpec",
    "PodVolumeHealth": (
        "1 name s!; 2 healthConditions [VolumeHealthCondition]; 3 lastTransitionTime time"
    ),
    "PolicyRule": (
        "1 verbs [s]; 2 apiGroups [s]; 3 resources [s]; 4 resourceNames [s]; 5 nonResourceURLs [s]"
    ),
    "PortStatus": "1 port i!; 2 protocol s!; 3 error s?",
    "PortworxVolumeSource": "1 volumeID s!; 2 fsType s; 3 readOnly b",
    "Preconditions": "1 uid s?; 2 resourceVersion s?",
    "PreferredSchedulingTerm": "1 weight i!; 2 preference NodeSelectorTerm",
    "Probe": (
        "1 ^ ProbeHandler; 2 initialDelaySeconds i; 3 timeoutSeconds i; 4 periodSeconds i; "
        "5 successThreshold i; 6 failureThreshold i; 7 terminationGracePeriodSeconds l?"
    ),
    "ProbeHandler": (
        "1 exec ExecAction?; 2 httpGet HTTPGetAction?; 3 tcpSocket TCPSocketAction?; "
        "4 grpc GRPCAction?"
    ),
    "ProjectedVolumeSource": "1 sources [VolumeProjection]; 2 defaultMode i?; 3 defaultUser l?",
    "QuobyteVolumeSource": (
        "1 registry s!; 2 volume s!; 3 readOnly b; 4 user s; 5 group s; 6 tenant s"
    ),
    "RBDVolumeSource": (
        "1 monitors [s]; 2 image s!; 3 fsType s; 4 pool s; 5 user s; 6 keyring s; "
        "7 secretRef LocalObjectReference?; 8 readOnly b"
    ),
    "ReplicaSet": "1 metadata ObjectMeta; 2 spec ReplicaSetSpec; 3 status ReplicaSetStatus",
    "ReplicaSetCondition": (
        "1 type s!; 2 status s!; 3 lastTransitionTime time; 4 reason s; 5 message s"
    ),
    "ReplicaSetSpec": (
        "1 replicas i?; 4 minReadySeconds i; 2 selector LabelSelector?; 3 template PodTemplateSpec"
    ),
    "ReplicaSetStatus": (
        "1 replicas i!; 2 fullyLabeledReplicas i; 4 readyReplicas i; 5 availableReplicas i; "
        "7 terminatingReplicas i?; 3 observedGeneration l; 6 conditions [ReplicaSetCondition]"
    ),
    "ResourceClaim": "1 name s!; 2 request s",
    "ResourceFieldSelector": "1 containerName s; 2 resource s!; 3 divisor quantity",
    "ResourceHealth": "1 resourceID s!; 2 health s; 6 message s?",
    "ResourceRequirements": (
        "1 limits {s:quantity}; 2 requests {s:quantity}; 3 claims [ResourceClaim]"
    ),
    "ResourceStatus": "1 name s!; 2 resources [ResourceHealth]",
    "Role": "1 metadata ObjectMeta; 2 rules [PolicyRule]",
    "RoleBinding": "1 metadata ObjectMeta; 2 subjects [Subject]; 3 roleRef RoleRef",
    "RoleRef": "1 apiGroup s!; 2 kind s!; 3 name s!",
    "RollingUpdateDaemonSet": "1 maxUnavailable intstr?; 2 maxSurge intstr?",
    "RollingUpdateDeployment": "1 maxUnavailable intstr?; 2 maxSurge intstr?",
    "RollingUpdateStatefulSetStrategy": "1 partition i?; 2 maxUnavailable intstr?",
    "SELinuxOptions": "1 user s; 2 role s; 3 type s; 4 level s",
    "ScaleIOVolumeSource": (
        "1 gateway s!; 2 system s!; 3 secretRef LocalObjectReference?; 4 sslEnabled b; "
        "5 protectionDomain s; 6 storagePool s; 7 storageMode s; 8 volumeName s; 9 fsType s; "
        "10 readOnly b"
    ),
    "SeccompProfile": "1 type s!; 2 localhostProfile s?",
    "Secret": "1 metadata ObjectMeta; 5 immutable b?; 2 data {s:y}; 4 stringData {s:s}; 3 type s",
    "SecretEnvSource": "1 ^ LocalObjectReference; 2 optional b?",
    "SecretKeySelector": "1 ^ LocalObjectReference; 2 key s!; 3 optional b?",
    "SecretProjection": "1 ^ LocalObjectReference; 2 items [KeyToPath]; 4 optional b?",
    "SecretVolumeSource": (
        "1 secretName s; 2 items [KeyToPath]; 3 defaultMode i?; 4 optional b?; 5 defaultUser l?"
    ),
    "SecurityContext": (
        "1 capabilities Capabilities?; 2 privileged b?; 3 seLinuxOptions SELinuxOptions?; "
        "10 windowsOptions WindowsSecurityContextOptions?; 4 runAsUser l?; 8 runAsGroup l?; "
        "5 runAsNonRoot b?; 6 readOnlyRootFilesystem b?; 7 allowPrivilegeEscalation b?; "
        "9 procMount s?; 11 seccompProfile SeccompProfile?; "
        "12 appArmorProfile AppArmorProfile?"
    ),
    "Service": "1 metadata ObjectMeta; 2 spec ServiceSpec; 3 status ServiceStatus",
    "ServiceAccount": (
        "1 metadata ObjectMeta; 2 secrets [ObjectReference]; "
        "3 imagePullSecrets [LocalObjectReference]; 4 automountServiceAccountToken b?"
    ),
    "ServiceAccountTokenProjection": "1 audience s; 2 expirationSeconds l?; 3 path s!; 4 user l?",
    "ServicePort": (
        "1 name s; 2 protocol s; 6 appProtocol s?; 3 port i!; 4 targetPort intstr; 5 nodePort i"
    ),
    "ServiceSpec": (
        "1 ports [ServicePort]; 2 selector {s:s}; 3 clusterIP s; 18 clusterIPs [s]; 4 type s; "
        "5 externalIPs [s]; 7 sessionAffinity s; 8 loadBalancerIP s; "
        "9 loadBalancerSourceRanges [s]; 10 externalName s; 11 externalTrafficPolicy s; "
        "12 healthCheckNodePort i; 13 publishNotReadyAddresses b; "
        "14 sessionAffinityConfig SessionAffinityConfig?; 19 ipFamilies [s]; "
        "17 ipFamilyPolicy s?; 20 allocateLoadBalancerNodePorts b?; 21 loadBalancerClass s?; "
        "22 internalTrafficPolicy s?; 23 trafficDistribution s?"
    ),
    "ServiceStatus": "1 loadBalancer LoadBalancerStatus; 2 conditions [Condition]",
    "SessionAffinityConfig": "1 clientIP ClientIPConfig?",
    "SleepAction": "1 seconds l!",
    "StatefulSet": "1 metadata ObjectMeta; 2 spec StatefulSetSpec; 3 status StatefulSetStatus",
    "StatefulSetCondition": (
        "1 type s!; 2 status s!; 3 lastTransitionTime time; 4 reason s; 5 message s"
    ),
    "StatefulSetOrdinals": "1 start i!",
    "StatefulSetPersistentVolumeClaimRetentionPolicy": "1 whenDeleted s; 2 whenScaled s",
    "StatefulSetSpec": (
        "1 replicas i?; 2 selector LabelSelector?; 3 template PodTemplateSpec; "
        "4 volumeClaimTemplates [PersistentVolumeClaim]; 5 serviceName s!; "
        "6 podManagementPolicy s; 7 updateStrategy StatefulSetUpdateStrategy; "
        "8 revisionHistoryLimit i?; 9 minReadySeconds i; "
        "10 persistentVolumeClaimRetentionPolicy StatefulSetPersistentVolumeClaimRetentionPolicy?; "
        "11 ordinals StatefulSetOrdinals?"
    ),
    "StatefulSetStatus": (
        "1 observedGeneration l; 2 replicas i!; 3 readyReplicas i; 4 currentReplicas i; "
        "5 updatedReplicas i; 6 currentRevision s; 7 updateRevision s; 9 collisionCount i?; "
        "10 conditions [StatefulSetCondition]; 11 availableReplicas i!"
    ),
    "StatefulSetUpdateStrategy": "1 type s; 2 rollingUpdate RollingUpdateStatefulSetStrategy?",
    "StorageOSVolumeSource": (
        "1 volumeName s; 2 volumeNamespace s; 3 fsType s; 4 readOnly b; "
        "5 secretRef LocalObjectReference?"
    ),
    "Subject": "1 kind s!; 2 apiGroup s; 3 name s!; 4 namespace s",
    "SuccessPolicy": "1 rules [SuccessPolicyRule]",
    "SuccessPolicyRule": "1 succeededIndexes s?; 2 succeededCount i?",
    "Sysctl": "1 name s!; 2 value s!",
    "TCPSocketAction": "1 port intstr; 2 host s",
    "Toleration": "1 key s; 2 operator s; 3 value s; 4 effect s; 5 tolerationSeconds l?",
    "TopologySpreadConstraint": (
        "1 maxSkew i!; 2 topologyKey s!; 3 whenUnsatisfiable s!; "
        "4 labelSelector LabelSelector?; 5 minDomains i?; 6 nodeAffinityPolicy s?; "
        "7 nodeTaintsPolicy s?; 8 matchLabelKeys [s]"
    ),
    "TypedLocalObjectReference": "1 apiGroup s?; 2 kind s!; 3 name s!",
    "TypedObjectReference": "1 apiGroup s?; 2 kind s!; 3 name s!; 4 namespace s?",
    "UncountedTerminatedPods": "1 succeeded [s]; 2 failed [s]",
    "Volume": "1 name s!; 2 ^ VolumeSource",
    "VolumeDevice": "1 name s!; 2 devicePath s!",
    "VolumeHealthCondition": "1 status s!; 2 reason s!; 3 message s",
    "VolumeHealthStatus": "1 healthConditions [VolumeHealthCondition]; 2 lastTransitionTime time",
    "VolumeMount": (
        "1 name s!; 2 readOnly b; 7 recursiveReadOnly s?; 3 mountPath s!; 4 subPath s; "
        "5 mountPropagation s?; 6 subPathExpr s; 8 bindMountOptions [s]"
    ),
    "VolumeMountStatus": (
        "1 name s!; 2 mountPath s!; 3 readOnly b; 4 recursiveReadOnly s?; "
        "5 volumeStatus VolumeStatus?"
    ),
    "VolumeProjection": (
        "1 secret SecretProjection?; 2 downwardAPI DownwardAPIProjection?; "
        "3 configMap ConfigMapProjection?; "
        "4 serviceAccountToken ServiceAccountTokenProjection?; "
        "5 clusterTrustBundle ClusterTrustBundleProjection?; "
        "6 podCertificate PodCertificateProjection?"
    ),
    "VolumeResourceRequirements": "1 limits {s:quantity}; 2 requests {s:quantity}",
    "VolumeSource": (
        "1 hostPath HostPathVolumeSource?; 2 emptyDir EmptyDirVolumeSource?; "
        "3 gcePersistentDisk GCEPersistentDiskVolumeSource?; "
        "4 awsElasticBlockStore AWSElasticBlockStoreVolumeSource?; "
        "5 gitRepo GitRepoVolumeSource?; 6 secret SecretVolumeSource?; 7 nfs NFSVolumeSource?; "
        "8 iscsi ISCSIVolumeSource?; 9 glusterfs GlusterfsVolumeSource?; "
        "10 persistentVolumeClaim PersistentVolumeClaimVolumeSource?; 11 rbd RBDVolumeSource?; "
        "12 flexVolume FlexVolumeSource?; 13 cinder CinderVolumeSource?; "
        "14 cephfs CephFSVolumeSource?; 15 flocker FlockerVolumeSource?; "
        "16 downwardAPI DownwardAPIVolumeSource?; 17 fc FCVolumeSource?; "
        "18 azureFile AzureFileVolumeSource?; 19 configMap ConfigMapVolumeSource?; "
        "20 vsphereVolume VsphereVirtualDiskVolumeSource?; 21 quobyte QuobyteVolumeSource?; "
        "22 azureDisk AzureDiskVolumeSource?; "
        "23 photonPersistentDisk PhotonPersistentDiskVolumeSource?; "
        "26 projected ProjectedVolumeSource?; 24 portworxVolume PortworxVolumeSource?; "
        "25 scaleIO ScaleIOVolumeSource?; 27 storageos StorageOSVolumeSource?; "
        "28 csi CSIVolumeSource?; 29 ephemeral EphemeralVolumeSource?; "
        "30 image ImageVolumeSource?"
    ),
    "VolumeStatus": "1 image ImageVolumeStatus?",
    "VsphereVirtualDiskVolumeSource": (
        "1 volumePath s!; 2 fsType s; 3 storagePolicyName s; 4 storagePolicyID s"
    ),
    "WeightedPodAffinityTerm": "1 weight i!; 2 podAffinityTerm PodAffinityTerm",
    "WindowsSecurityContextOptions": (
        "1 gmsaCredentialSpecName s?; 2 gmsaCredentialSpec s?; 3 runAsUserName s?; 4 hostProcess b?"
    ),
}
# Go keeps the two structs identical field for field.
MESSAGES["EphemeralContainerCommon"] = MESSAGES["Container"]
