{{/* Common names and labels. */}}
{{- define "hyperbatch.name" -}}hyperbatch{{- end -}}

{{- define "hyperbatch.labels" -}}
app.kubernetes.io/name: hyperbatch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "hyperbatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "hyperbatch.certModeValid" -}}
{{- if not (has .Values.certs.mode (list "self" "cert-manager")) -}}
{{- fail (printf "certs.mode must be self or cert-manager, got %q" .Values.certs.mode) -}}
{{- end -}}
{{- end -}}
