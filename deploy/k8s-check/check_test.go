package k8scheck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestManifestsKeepPromises: the base and the example overlay pass every check.
func TestManifestsKeepPromises(t *testing.T) {
	for _, dir := range []string{baseDir, overlayDir} {
		t.Run(dir, func(t *testing.T) {
			m, err := Render(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range Check(m, DefaultWant()) {
				t.Error(p)
			}
		})
	}
}

// TestCheckCatchesBreakage breaks the rendered overlay one way at a time
// and expects Check to say so.
func TestCheckCatchesBreakage(t *testing.T) {
	ctr := func(m *Manifests) *corev1.Container { return &m.Deployments[0].Spec.Template.Spec.Containers[0] }
	pod := func(m *Manifests) *corev1.PodSpec { return &m.Deployments[0].Spec.Template.Spec }
	setConfig := func(m *Manifests, from, to string) {
		m.ConfigMaps[0].Data["config.yaml"] = strings.Replace(m.ConfigMaps[0].Data["config.yaml"], from, to, 1)
	}
	setRedis := func(m *Manifests, file, from, to string) {
		m.ConfigMaps[1].Data[file] = strings.Replace(m.ConfigMaps[1].Data[file], from, to, 1)
	}
	tests := []struct {
		name   string
		break_ func(m *Manifests)
		want   string
	}{
		{"replicas beside the HPA", func(m *Manifests) { four := int32(4); m.Deployments[0].Spec.Replicas = &four },
			`Deployment sets replicas 4 beside HorizontalPodAutoscaler "callout-proxy"`},
		{"two replicas, no HPA", func(m *Manifests) { two := int32(2); m.Deployments[0].Spec.Replicas = &two; m.HPAs = nil },
			"Deployment replicas 2, want at least 3"},
		{"readiness on healthz", func(m *Manifests) { ctr(m).ReadinessProbe.HTTPGet.Path = "/healthz" },
			`readinessProbe path "/healthz", want "/readyz"`},
		{"liveness on admin port", func(m *Manifests) { ctr(m).LivenessProbe.HTTPGet.Port = intstr.FromString("admin") },
			"livenessProbe port resolves to 8081"},
		{"no liveness", func(m *Manifests) { ctr(m).LivenessProbe = nil }, "livenessProbe is not an httpGet probe"},
		{"no memory limit", func(m *Manifests) { delete(ctr(m).Resources.Limits, corev1.ResourceMemory) }, "no memory limit"},
		{"request above limit", func(m *Manifests) { ctr(m).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4") },
			"cpu request 4 above its limit 2"},
		{"grace too short", func(m *Manifests) { g := int64(30); pod(m).TerminationGracePeriodSeconds = &g },
			"terminationGracePeriodSeconds 30 must exceed preStop 10s + longest attempt_timeout 20s + drain 5s = 35s"},
		{"longer attempt in config", func(m *Manifests) { setConfig(m, "attempt_timeout: 20s", "attempt_timeout: 40s") },
			"longest attempt_timeout 40s"},
		{"no preStop", func(m *Manifests) { ctr(m).Lifecycle = nil }, "no preStop sleep"},
		{"admin token literal", func(m *Manifests) {
			for i := range ctr(m).Env {
				if ctr(m).Env[i].Name == "CALLOUT_PROXY_ADMIN_TOKEN" {
					ctr(m).Env[i] = corev1.EnvVar{Name: "CALLOUT_PROXY_ADMIN_TOKEN", Value: "literal-admin-token"}
				}
			}
		}, "env CALLOUT_PROXY_ADMIN_TOKEN is read by the config but is not a secretKeyRef"},
		{"env not provided", func(m *Manifests) { setConfig(m, "{env: PAYMENT_API_AUTH}", "{env: PAYMENT_API_TOKEN}") },
			"env PAYMENT_API_TOKEN is read by the config but the container does not set it"},
		{"file not in secret items", func(m *Manifests) { setConfig(m, "secrets/sf-jwt.key", "secrets/sf.key") },
			"file /etc/callout-proxy/secrets/sf.key is read by the config but Secret volume \"secrets\" has no item"},
		{"file under no mount", func(m *Manifests) { setConfig(m, "/etc/callout-proxy/secrets/sf-jwt.key", "/run/sf-jwt.key") },
			"file /run/sf-jwt.key is read by the config but is under no volume mount"},
		{"listen on loopback", func(m *Manifests) { setConfig(m, `listen: ":8080"`, "listen: 127.0.0.1:8080") },
			`config listen "127.0.0.1:8080" does not listen on every address of the pod`},
		{"listen on IPv4 only", func(m *Manifests) { setConfig(m, `admin_listen: ":8081"`, "admin_listen: 0.0.0.0:8081") },
			`config admin_listen "0.0.0.0:8081" does not listen on every address of the pod, IPv4 and IPv6`},
		{"embedded store", func(m *Manifests) { setConfig(m, "redis:", "unused_redis:") },
			"config has no redis.url, redis.cluster or redis.sentinel"},
		{"redis appendfsync everysec", func(m *Manifests) { setRedis(m, "redis.conf", "appendfsync always", "appendfsync everysec") },
			`redis.conf: appendfsync "everysec", want "always"`},
		{"redis evicts", func(m *Manifests) {
			setRedis(m, "redis.conf", "maxmemory-policy noeviction", "maxmemory-policy allkeys-lru")
		}, `maxmemory-policy "allkeys-lru", want "noeviction"`},
		{"redis without AOF", func(m *Manifests) { setRedis(m, "redis.conf", "appendonly yes", "appendonly no") },
			`appendonly "no", want "yes"`},
		{"sentinel quorum of one", func(m *Manifests) { setRedis(m, "sentinel.conf", "6379 2", "6379 1") },
			"quorum 1, want a majority of 3 Sentinels (2)"},
		{"two redis pods", func(m *Manifests) { two := int32(2); m.StatefulSets[0].Spec.Replicas = &two },
			"StatefulSet callout-redis has 2 pods, want 3"},
		{"redis pods may share a node", func(m *Manifests) { m.StatefulSets[0].Spec.Template.Spec.Affinity = nil },
			"no required pod anti-affinity on kubernetes.io/hostname"},
		{"redis data not persistent", func(m *Manifests) { m.StatefulSets[0].Spec.VolumeClaimTemplates = nil },
			"/data of container redis is not a volumeClaimTemplate"},
		{"proxy misses a sentinel", func(m *Manifests) {
			setConfig(m, "      - callout-redis-2.callout-redis.callout-proxy.svc:26379\n", "")
		},
			"config redis.sentinel.addresses"},
		{"proxy durability local", func(m *Manifests) { setConfig(m, "\n  durability: replicated", "\n  durability: local") },
			`config redis.durability "local" with Sentinel replicas`},
		{"proxy names another master", func(m *Manifests) { setConfig(m, "master_name: callouts", "master_name: mymaster") },
			`master_name "mymaster", but the Sentinels monitor "callouts"`},
		{"no salesforce", func(m *Manifests) { setConfig(m, "\nsalesforce:", "\nunused_salesforce:") },
			"or a salesforce section (false)"},
		{"root", func(m *Manifests) { f := false; pod(m).SecurityContext.RunAsNonRoot = &f }, "runAsNonRoot is not true"},
		{"service exposes admin", func(m *Manifests) {
			m.Services[0].Spec.Ports = append(m.Services[0].Spec.Ports,
				corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromString("admin")})
		}, `Service port "metrics" exposes the admin port 8081`},
		{"service selects nothing", func(m *Manifests) { m.Services[0].Spec.Selector = map[string]string{"app": "other"} },
			"Service selector map[app:other] does not select the pods"},
		{"pdb blocks drains", func(m *Manifests) { z := intstr.FromInt32(0); m.PDBs[0].Spec.MaxUnavailable = &z },
			"must allow between 1 and 2 voluntary disruptions"},
		{"hpa below minimum", func(m *Manifests) { one := int32(1); m.HPAs[0].Spec.MinReplicas = &one },
			"HPA minReplicas 1, want at least 3"},
		{"hpa on something else", func(m *Manifests) { m.HPAs[0].Spec.ScaleTargetRef.Name = "other" },
			"no HorizontalPodAutoscaler targets Deployment"},
		{"admin open to all", func(m *Manifests) { m.NetworkPolicies[0].Spec.Ingress[1].From = nil },
			`ingress rule 1 admits the admin port from beyond namespace "monitoring"`},
		{"rule without ports", func(m *Manifests) { m.NetworkPolicies[0].Spec.Ingress[0].Ports = nil },
			`ingress rule 0 admits the admin port`},
		{"admin from an ipBlock", func(m *Manifests) {
			m.NetworkPolicies[0].Spec.Ingress[1].From = append(m.NetworkPolicies[0].Spec.Ingress[1].From,
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		}, "ingress rule 1 admits the admin port"},
		{"policy on every pod", func(m *Manifests) { m.NetworkPolicies[0].Spec.PodSelector = metav1.LabelSelector{} },
			"no NetworkPolicy selects the pods"},
		{"token mounted", func(m *Manifests) { tr := true; pod(m).AutomountServiceAccountToken = &tr },
			"the pod mounts a service account token"},
		{"config not mounted", func(m *Manifests) { ctr(m).Args = []string{"--config", "/etc/other/config.yaml"} },
			"--config /etc/other/config.yaml is under no volume mount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Render(overlayDir)
			if err != nil {
				t.Fatal(err)
			}
			tt.break_(m)
			problems := Check(m, DefaultWant())
			for _, p := range problems {
				if strings.Contains(p, tt.want) {
					return
				}
			}
			t.Errorf("no problem contains %q; got %q", tt.want, problems)
		})
	}
}
