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
{{- if not (has .Values.mode (list "standalone" "member" "control-plane")) -}}
{{- fail (printf "mode must be standalone, member or control-plane, got %q" .Values.mode) -}}
{{- end -}}
{{- if eq .Values.mode "control-plane" -}}
{{- if .Values.scheduler.enabled -}}
{{- fail "mode control-plane needs scheduler.enabled=false: no pod runs on a Karmada control plane (install the chart with mode=member in each member cluster for hyperbatch-scheduler)" -}}
{{- end -}}
{{- if ne .Values.certs.mode "self" -}}
{{- fail "mode control-plane needs certs.mode=self: the webhook configurations live on the Karmada apiserver, where cert-manager's cainjector does not run; the manager injects the caBundle there itself" -}}
{{- end -}}
{{- if not .Values.controlPlane.kubeconfigSecret -}}
{{- fail "mode control-plane needs controlPlane.kubeconfigSecret: the Secret in the release namespace holding the Karmada apiserver's kubeconfig" -}}
{{- end -}}
{{- end -}}
{{- end -}}


{{/* Priority class, node selection and anti-affinity of a component's pods: replicas prefer different nodes. */}}
{{- define "hyperbatch.podPlacement" -}}
{{- with .root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {app.kubernetes.io/name: hyperbatch, app.kubernetes.io/instance: {{ .root.Release.Name }}, app.kubernetes.io/component: {{ .component }}}
{{- end -}}

{{/* PodDisruptionBudget of a component. */}}
{{- define "hyperbatch.pdb" -}}
{{- if .root.Values.podDisruptionBudget.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: hyperbatch-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "hyperbatch.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  maxUnavailable: {{ .root.Values.podDisruptionBudget.maxUnavailable }}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels: {app.kubernetes.io/name: hyperbatch, app.kubernetes.io/instance: {{ .root.Release.Name }}, app.kubernetes.io/component: {{ .component }}}
{{- end }}
{{- end -}}

{{/* The admission mode, resolved as the manager resolves --admission: policy where the apiserver
serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy and admission.mode is policy or auto,
else webhook. */}}
{{- define "hyperbatch.admissionMode" -}}
{{- if not (has .Values.admission.mode (list "webhook" "policy" "auto")) -}}
{{- fail (printf "admission.mode must be webhook, policy or auto, got %q" .Values.admission.mode) -}}
{{- end -}}
{{- if and (ne .Values.admission.mode "webhook") (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy") -}}
policy
{{- else if eq .Values.admission.mode "policy" -}}
{{- fail "admission.mode=policy: the cluster does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36 or later); use webhook or auto" -}}
{{- else -}}
webhook
{{- end -}}
{{- end -}}
