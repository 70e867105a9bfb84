package k8scheck

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

const (
	baseDir    = "../k8s/base"
	overlayDir = "../k8s/overlays/example"
)

// TestRenderDecodesEveryObjectStrictly renders the base and the example
// overlay; Render fails on any object that does not decode strictly.
func TestRenderDecodesEveryObjectStrictly(t *testing.T) {
	tests := []struct {
		dir  string
		want map[string]int
	}{
		{baseDir, map[string]int{"Namespace": 0, "ServiceAccount": 1, "ConfigMap": 1, "Service": 1,
			"Deployment": 1, "PodDisruptionBudget": 1, "HorizontalPodAutoscaler": 1, "NetworkPolicy": 1}},
		// The overlay adds deploy/k8s/redis: a StatefulSet, its ConfigMap,
		// headless Service, PDB and NetworkPolicy.
		{overlayDir, map[string]int{"Namespace": 1, "ServiceAccount": 1, "ConfigMap": 2, "Service": 2,
			"Deployment": 1, "StatefulSet": 1, "PodDisruptionBudget": 2, "HorizontalPodAutoscaler": 1, "NetworkPolicy": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			m, err := Render(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{"Namespace": len(m.Namespaces), "ServiceAccount": len(m.ServiceAccounts),
				"ConfigMap": len(m.ConfigMaps), "Service": len(m.Services), "Deployment": len(m.Deployments),
				"StatefulSet":         len(m.StatefulSets),
				"PodDisruptionBudget": len(m.PDBs), "HorizontalPodAutoscaler": len(m.HPAs),
				"NetworkPolicy": len(m.NetworkPolicies)}
			for kind, n := range tt.want {
				if got[kind] != n {
					t.Errorf("%d %s objects, want %d", got[kind], kind, n)
				}
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name, apiVersion, kind, doc, want string
	}{
		{"misspelled field", "apps/v1", "Deployment",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 3\n", `unknown field "replica"`},
		{"wrong type", "apps/v1", "Deployment",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: three\n", "strict decoding"},
		{"duplicate key", "v1", "Service",
			"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n", "strict decoding"},
		{"old apiVersion", "autoscaling/v1", "HorizontalPodAutoscaler",
			"apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\n", `want "autoscaling/v2"`},
		{"unknown kind", "v1", "Pod", "apiVersion: v1\nkind: Pod\n", "not one the checks know"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Manifests{}).Decode(tt.apiVersion, tt.kind, []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestOverlay checks what the example overlay changes: namespace, image,
// the autoscaler's floor (and no replicas beside it), and a ConfigMap
// holding exactly its own configuration file.
func TestOverlay(t *testing.T) {
	m, err := Render(overlayDir)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(overlayDir + "/callout-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dep := mustDeployment(t, m, "callout-proxy")
	wantChecks(t, []check{
		{"namespace", dep.Namespace, "callout-proxy"},
		{"image", dep.Spec.Template.Spec.Containers[0].Image, "registry.example.com/platform/callout-proxy:0.1.0"},
		{"no replicas beside the HPA", dep.Spec.Replicas == nil, true},
		{"hpa min", *m.HPAs[0].Spec.MinReplicas, int32(4)},
		{"config", m.ConfigMaps[0].Data["config.yaml"], string(file)},
		{"configmap name hashed", strings.HasPrefix(m.ConfigMaps[0].Name, "callout-proxy-config-"), true},
		{"volume follows the hash", findVolume(&dep.Spec.Template.Spec, "config").ConfigMap.Name, m.ConfigMaps[0].Name},
	})
}

// check is one value of rendered objects and the value it must have.
type check struct {
	name      string
	got, want any
}

// wantChecks runs each check as a subtest: got must equal want.
func wantChecks(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %v, want %v", c.got, c.want)
			}
		})
	}
}

// mustDeployment is the Deployment name of m; it fails the test when m has
// none.
func mustDeployment(t *testing.T, m *Manifests, name string) *appsv1.Deployment {
	t.Helper()
	dep := findDeployment(m, name)
	if dep == nil {
		t.Fatal("no Deployment " + name)
	}
	return dep
}
