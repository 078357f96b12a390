{{/* Common labels of every object. */}}
{{- define "cascade.labels" -}}
app.kubernetes.io/part-of: cascade
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The image of a component: registry/name:tag. */}}
{{- define "cascade.image" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- printf "%s/%s:%s" $root.Values.image.registry $name (default $root.Chart.AppVersion $root.Values.image.tag) -}}
{{- end }}

{{/* A generated RBAC file with the release's namespaces filled in. */}}
{{- define "cascade.rbac" -}}
{{- $root := index . 0 -}}{{- $file := index . 1 -}}
{{- $root.Files.Get $file | replace "__RELEASE_NAMESPACE__" $root.Release.Namespace | replace "__SETTING_limitadorNamespace__" $root.Values.ratelimitpolicy.limitadorNamespace -}}
{{- end }}

{{/* A policy controller's ClusterRole granted cluster-wide, or with controllers.watchNamespaces in
those namespaces only (a RoleBinding each; they must exist) plus the cluster-scoped reads
(GatewayClasses, Namespaces). The RoleBindings are what controllerWatchBindings in core makes. */}}
{{- define "cascade.controllerGrant" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- with $root.Values.controllers.watchNamespaces }}
{{- include "cascade.rbac" (list $root (printf "files/rbac/%s-cluster-reads.yaml" $name)) }}
{{- range $ns := . }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-watch
  namespace: {{ $ns }}
  labels:
    app.kubernetes.io/part-of: cascade
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- else }}
{{- include "cascade.rbac" (list $root (printf "files/rbac/%s-binding.yaml" $name)) }}
{{- end }}
{{- end }}

{{/* Where agents learn the pods: agent.podSource, or slices when the netpolicy-controller runs. */}}
{{- define "cascade.podSource" -}}
{{- .Values.agent.podSource | default (ternary "slices" "pods" .Values.netpolicy.enabled) -}}
{{- end }}
