{{/* The agent's name: the Deployment, Service and labels are named for it. */}}
{{- define "writ.name" -}}
{{- .Values.agent.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "writ.selector" -}}
app.kubernetes.io/name: {{ include "writ.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "writ.labels" -}}
{{ include "writ.selector" . }}
app.kubernetes.io/component: agent-with-writ
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "writ.image" -}}
{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end -}}

{{/* The policy ConfigMap's keys, as a JSON list ([] for the embedded policies). */}}
{{- define "writ.policyKeys" -}}
{{- if .Values.policies.files -}}
{{- keys .Values.policies.files | sortAlpha | toJson -}}
{{- else if .Values.policies.existingConfigMap -}}
{{- .Values.policies.keys | toJson -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}

{{- define "writ.policyConfigMap" -}}
{{- if .Values.policies.files -}}
{{- printf "%s-writ-policies" (include "writ.name" .) -}}
{{- else -}}
{{- .Values.policies.existingConfigMap -}}
{{- end -}}
{{- end -}}

{{/*
writ.yaml. The chart sets the listeners (on the pod IP: the kubelet's probes
and Prometheus connect there), the file store on the writ-state volume, the
one agent over the pod's loopback, TLS and policies from the mounted Secret
and ConfigMap; writ.identity and writ.config come from the values, the latter
merged last.
*/}}
{{- define "writ.config" -}}
{{- $v := .Values -}}
{{- $agent := dict "name" $v.agent.name "route" "/" "upstream" (printf "http://127.0.0.1:%v" $v.agent.port) "protocol" $v.agent.protocol "max_data_classification" $v.agent.maxDataClassification "security_schemes" $v.agent.securitySchemes -}}
{{- with $v.agent.publicURL }}{{ $_ := set $agent "public_url" . }}{{ end -}}
{{- with $v.agent.owner }}{{ $_ := set $agent "owner" . }}{{ end -}}
{{- with $v.agent.tenants }}{{ $_ := set $agent "tenants" . }}{{ end -}}
{{- with $v.agent.skills }}{{ $_ := set $agent "skills" . }}{{ end -}}
{{- $c := dict "listen" (printf "0.0.0.0:%v" $v.writ.port) "admin" (printf "0.0.0.0:%v" $v.writ.adminPort) "log" (dict "level" $v.writ.logLevel) "lifecycle" (dict "max_tasks" $v.writ.maxTasks) "decision_log" (dict "output" "stdout") "agents" (list $agent) -}}
{{- if not (hasKey $v.writ.config "store") -}}
{{- $_ := set $c "store" (dict "kind" "file" "path" "/var/lib/writ/writ.db") -}}
{{- end -}}
{{- with $v.writ.identity }}{{ $_ := set $c "identity" (deepCopy .) }}{{ end -}}
{{- if $v.secrets.tls -}}
{{- $tls := dict "cert_file" "/etc/writ/secrets/tls/tls.crt" "key_file" "/etc/writ/secrets/tls/tls.key" -}}
{{- if ne $v.secrets.tlsClientAuth "none" -}}
{{- $_ := set $tls "client_ca_file" "/etc/writ/secrets/tls/ca.crt" -}}
{{- $_ := set $tls "client_auth" $v.secrets.tlsClientAuth -}}
{{- end -}}
{{- $_ := set $c "tls" $tls -}}
{{- end -}}
{{- $paths := list -}}
{{- range (include "writ.policyKeys" . | fromJsonArray) -}}
{{- $paths = append $paths (printf "/etc/writ/policies/%s" .) -}}
{{- end -}}
{{- if $paths }}{{ $_ := set $c "policies" $paths }}{{ end -}}
{{- $f := $v.fleet -}}
{{- with $f.labels }}{{ $_ := set $c "labels" (deepCopy .) }}{{ end -}}
{{- if $f.bundle.url -}}
{{- if $paths }}{{ fail "fleet.bundle.url and policies are exclusive: the policy comes from a bundle service or from files" }}{{ end -}}
{{- $b := dict "url" $f.bundle.url "poll_min" $f.bundle.pollMin "poll_max" $f.bundle.pollMax "persist_dir" "/var/lib/writ/bundle" -}}
{{- with $f.bundle.type }}{{ $_ := set $b "type" . }}{{ end -}}
{{- if $v.secrets.bundleSigningKey -}}
{{- $sig := dict "key_id" $f.bundle.signing.keyId "algorithm" $f.bundle.signing.algorithm "public_key_file" "/etc/writ/secrets/bundle/public.pem" -}}
{{- with $f.bundle.signing.scope }}{{ $_ := set $sig "scope" . }}{{ end -}}
{{- $_ := set $b "signing" $sig -}}
{{- end -}}
{{- $_ := set $c "policy_bundle" $b -}}
{{- end -}}
{{- if $f.decisionLogUpload.url -}}
{{- $up := dict "url" $f.decisionLogUpload.url -}}
{{- with $f.decisionLogUpload.mask }}{{ $_ := set $up "mask" . }}{{ end -}}
{{- if hasKey $f.decisionLogUpload "lifecycle" }}{{ $_ := set $up "lifecycle" $f.decisionLogUpload.lifecycle }}{{ end -}}
{{- if $v.secrets.collectorToken }}{{ $_ := set $up "token_file" "/etc/writ/secrets/collector/token" }}{{ end -}}
{{- $_ := set (get $c "decision_log") "upload" $up -}}
{{- end -}}
{{- if $f.status.url -}}
{{- $st := dict "url" $f.status.url -}}
{{- with $f.status.partitionName }}{{ $_ := set $st "partition_name" . }}{{ end -}}
{{- if $v.secrets.statusToken }}{{ $_ := set $st "token_file" "/etc/writ/secrets/status/token" }}{{ end -}}
{{- $_ := set $c "status" $st -}}
{{- end -}}
{{- if $f.tracing.endpoint -}}
{{- $_ := set $c "tracing" (dict "endpoint" $f.tracing.endpoint "exporter" $f.tracing.exporter "insecure" $f.tracing.insecure "sample_ratio" $f.tracing.sampleRatio "service_name" (include "writ.name" .)) -}}
{{- end -}}
{{- $c = mergeOverwrite $c (deepCopy $v.writ.config) -}}
{{- if $v.secrets.adminToken -}}
{{- $_ := set $c "admin_token_file" "/etc/writ/secrets/admin/token" -}}
{{- end -}}
{{- if $v.secrets.redisPassword -}}
{{- $store := get $c "store" -}}
{{- $redis := get $store "redis" | default dict -}}
{{- $_ := set $redis "password_file" "/etc/writ/secrets/redis/password" -}}
{{- $_ := set $store "redis" $redis -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* The volumes writ (and writ validate) read: config, policies, secrets. */}}
{{- define "writ.readMounts" -}}
- {name: writ-config, mountPath: /etc/writ/config, readOnly: true}
{{- if include "writ.policyConfigMap" . }}
- {name: writ-policies, mountPath: /etc/writ/policies, readOnly: true}
{{- end }}
{{- if .Values.secrets.tls }}
- {name: writ-tls, mountPath: /etc/writ/secrets/tls, readOnly: true}
{{- end }}
{{- if .Values.secrets.jwks }}
- {name: writ-jwks, mountPath: /etc/writ/secrets/jwks, readOnly: true}
{{- end }}
{{- if .Values.secrets.redisPassword }}
- {name: writ-redis, mountPath: /etc/writ/secrets/redis, readOnly: true}
{{- end }}
{{- if .Values.secrets.adminToken }}
- {name: writ-admin-token, mountPath: /etc/writ/secrets/admin, readOnly: true}
{{- end }}
{{- if .Values.secrets.bundleSigningKey }}
- {name: writ-bundle-key, mountPath: /etc/writ/secrets/bundle, readOnly: true}
{{- end }}
{{- if .Values.secrets.collectorToken }}
- {name: writ-collector-token, mountPath: /etc/writ/secrets/collector, readOnly: true}
{{- end }}
{{- if .Values.secrets.statusToken }}
- {name: writ-status-token, mountPath: /etc/writ/secrets/status, readOnly: true}
{{- end }}
{{- end -}}

{{- define "writ.hardened" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}
