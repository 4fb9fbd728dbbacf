{{/*
The objects are named timeout-controller whatever the release is called:
the controller is installed once per cluster, and its ClusterRole, Lease and
TimeoutPolicy are cluster-wide in effect.
*/}}
{{- define "timeout-controller.name" -}}
timeout-controller
{{- end }}

{{- define "timeout-controller.chart" -}}
{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "timeout-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "timeout-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "timeout-controller.labels" -}}
{{ include "timeout-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: amphitheatre
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "timeout-controller.chart" . }}
{{- end }}

{{- define "timeout-controller.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ $image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
A PersistentVolumeClaim's spec from a persistence block.
*/}}
{{- define "timeout-controller.pvcSpec" -}}
accessModes:
  {{- toYaml .accessModes | nindent 2 }}
{{- with .storageClass }}
storageClassName: {{ . | quote }}
{{- end }}
resources:
  requests:
    storage: {{ .size | quote }}
{{- end }}

{{/*
Where --audit-log writes with audit.output "file".
*/}}
{{- define "timeout-controller.auditFile" -}}
/var/log/timeout-controller/audit.jsonl
{{- end }}

{{/*
The user the chart's own policy names as its author until the admission
policy stamps it: no one logs in as it; it only holds "use" on the chart's
own channels.
*/}}
{{- define "timeout-controller.chartAuthor" -}}
timeout-controller:chart:{{ .Release.Namespace }}:{{ .Release.Name }}
{{- end }}

{{/*
The actions server's labels: a name of its own, so that the controller's
Service, PodDisruptionBudget and spread constraints never select its pods.
*/}}
{{- define "timeout-controller.actionsSelectorLabels" -}}
app.kubernetes.io/name: {{ include "timeout-controller.name" . }}-actions
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "timeout-controller.actionsLabels" -}}
{{ include "timeout-controller.actionsSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: amphitheatre
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "timeout-controller.chart" . }}
{{- end }}
