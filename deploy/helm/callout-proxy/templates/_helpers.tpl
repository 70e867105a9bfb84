{{/*
The labels of every object and pod template, as the Kustomize base's
`labels` transformer writes them; selectors use only the name label.
*/}}
{{- define "callout-proxy.labels" -}}
app.kubernetes.io/name: {{ .Values.name }}
app.kubernetes.io/part-of: callout-proxy
{{- end }}

{{- define "callout-proxy.selector" -}}
app.kubernetes.io/name: {{ .Values.name }}
{{- end }}

{{- define "callout-proxy.image" -}}
{{- if .Values.image.tag -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- else -}}
{{ .Values.image.repository }}
{{- end -}}
{{- end }}
