{{/* The chart name, or nameOverride. */}}
{{- define "metashard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name: fullnameOverride, else <release>-<name> (or just the
release name when it already contains the chart name). */}}
{{- define "metashard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "metashard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "metashard.labels" -}}
helm.sh/chart: {{ include "metashard.chart" . }}
{{ include "metashard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: metashard
{{- end }}

{{/* Labels that select this release's pods (both roles). */}}
{{- define "metashard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metashard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of one role: include with (dict "root" $ "component" "coordinator"). */}}
{{- define "metashard.componentSelectorLabels" -}}
{{ include "metashard.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "metashard.componentLabels" -}}
{{ include "metashard.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "metashard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "metashard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "metashard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Service workers connect to. */}}
{{- define "metashard.linkService" -}}
{{- printf "%s-coordinator" (include "metashard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret the chart manages for the CURVE keys. */}}
{{- define "metashard.curveSecret" -}}
{{- printf "%s-curve" (include "metashard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The CURVE key Secret one role mounts: include with (dict "root" $ "role" "coordinator"). */}}
{{- define "metashard.roleCurveSecret" -}}
{{- $role := index .root.Values.curve .role }}
{{- coalesce $role.existingSecret .root.Values.curve.existingSecret (include "metashard.curveSecret" .root) }}
{{- end }}

{{/* True when the chart renders its own CURVE Secret: some role does not bring one. */}}
{{- define "metashard.managesCurveSecret" -}}
{{- $c := .Values.curve }}
{{- if and (not $c.existingSecret) (or (not $c.coordinator.existingSecret) (not $c.workers.existingSecret)) }}true{{- end }}
{{- end }}

{{/* Flags both roles take, after the role's own. */}}
{{- define "metashard.commonArgs" -}}
- --metrics-address
- {{ printf ":%d" (int .Values.ports.metrics) | quote }}
- --health-probe-bind-address
- {{ printf ":%d" (int .Values.ports.health) | quote }}
- --cluster-revision-namespace
- {{ .Values.clusterRevisionNamespace | default .Release.Namespace | quote }}
- --curve-keys
- /etc/metashard/curve
- --zap-log-level
- {{ .Values.logLevel | toString | quote }}
{{- end }}

{{/* Environment both roles get from the downward API. */}}
{{- define "metashard.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{/* Ports, probes, mounts and security of a container: include with
(dict "root" $ "link" true) for the coordinator, which also serves the link port. */}}
{{- define "metashard.containerCommon" -}}
{{- $v := .root.Values -}}
ports:
  {{- if .link }}
  - name: link
    containerPort: {{ $v.ports.link }}
    protocol: TCP
  {{- end }}
  - name: metrics
    containerPort: {{ $v.ports.metrics }}
    protocol: TCP
  - name: health
    containerPort: {{ $v.ports.health }}
    protocol: TCP
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
volumeMounts:
  - name: curve-keys
    mountPath: /etc/metashard/curve
    readOnly: true
  - name: tmp
    mountPath: /tmp
{{- end }}

{{/* Pod-level settings of one role: include with (dict "root" $ "role" "workers"). */}}
{{- define "metashard.podCommon" -}}
{{- $v := index .root.Values .role -}}
serviceAccountName: {{ include "metashard.serviceAccountName" .root }}
automountServiceAccountToken: true
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: curve-keys
    secret:
      secretName: {{ include "metashard.roleCurveSecret" (dict "root" .root "role" (ternary "coordinator" "workers" (eq .role "coordinator"))) }}
      defaultMode: 0440
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end }}
