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
