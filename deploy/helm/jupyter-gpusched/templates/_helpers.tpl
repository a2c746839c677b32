{{- define "gpusched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "gpusched.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpusched.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpusched.serviceAccount" -}}
{{- .Values.serviceAccount.name | default (include "gpusched.fullname" .) -}}
{{- end -}}

{{- define "gpusched.jobNamespaces" -}}
{{- if .Values.jobNamespaces }}{{ toJson .Values.jobNamespaces }}{{ else }}{{ toJson (list .Release.Namespace) }}{{ end -}}
{{- end -}}

{{- define "gpusched.baseUrl" -}}
{{- if eq .Values.mode "hub" }}{{ printf "/services/%s/" .Values.hub.serviceName }}{{ else }}{{ .Values.standalone.baseUrl }}{{ end -}}
{{- end -}}
