package k8scheck

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const chartDir = "../helm/callout-proxy"

// helmBinary returns the helm CLI to run: $HELM, else helm on PATH. Without
// one the tests skip, unless CALLOUT_REQUIRE_HELM=1 (deploy/check.sh sets
// it after installing helm) makes that a failure.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("CALLOUT_REQUIRE_HELM") == "1" {
			t.Fatal("CALLOUT_REQUIRE_HELM=1 but no helm on PATH and no $HELM")
		}
		t.Skip("no helm on PATH (deploy/check.sh installs it)")
	}
	return h
}

// kustomizeHash is the content-hash suffix kustomize's configMapGenerator
// appends to a generated name.
var kustomizeHash = regexp.MustCompile(`-[a-z0-9]{10}$`)

// TestHelmChartRendersTheBase: with its default values the chart renders
// exactly the objects of the Kustomize base, field for field, but for the
// two ways each rolls pods on a configuration change — kustomize's hash
// suffix on the ConfigMap's name, the chart's checksum/config annotation on
// the pod template, which must be the SHA-256 of the configuration.
func TestHelmChartRendersTheBase(t *testing.T) {
	chart, err := RenderHelm(helmBinary(t), "callout-proxy", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	base, err := Render(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(base.ConfigMaps) != 1 || len(base.Deployments) != 1 || len(chart.ConfigMaps) != 1 || len(chart.Deployments) != 1 {
		t.Fatalf("want one ConfigMap and one Deployment each; base %d/%d, chart %d/%d",
			len(base.ConfigMaps), len(base.Deployments), len(chart.ConfigMaps), len(chart.Deployments))
	}
	// kustomize: callout-proxy-config-<hash>, in the ConfigMap and the volume.
	hashed := base.ConfigMaps[0].Name
	name := kustomizeHash.ReplaceAllString(hashed, "")
	base.ConfigMaps[0].Name = name
	for i := range base.Deployments[0].Spec.Template.Spec.Volumes {
		if v := &base.Deployments[0].Spec.Template.Spec.Volumes[i]; v.ConfigMap != nil && v.ConfigMap.Name == hashed {
			v.ConfigMap.Name = name
		}
	}
	// the chart: checksum/config, the configuration's SHA-256.
	ann := chart.Deployments[0].Spec.Template.Annotations
	sum := sha256.Sum256([]byte(chart.ConfigMaps[0].Data["config.yaml"]))
	if got, want := ann["checksum/config"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("checksum/config %q, want the configuration's SHA-256 %s", got, want)
	}
	delete(ann, "checksum/config")

	if d := cmp.Diff(base, chart); d != "" {
		t.Errorf("the chart's objects differ from the base's (-base +chart):\n%s", d)
	}
	for _, p := range Check(chart, DefaultWant()) {
		t.Error(p)
	}
}

// TestHelmValues: the values a user sets reach the objects: the image, the
// autoscaler's range, a configuration file of their own (--set-file).
func TestHelmValues(t *testing.T) {
	config, err := os.ReadFile(overlayDir + "/callout-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := RenderHelm(helmBinary(t), "callout-proxy", chartDir,
		"--set", "image.repository=registry.example.com/platform/callout-proxy", "--set", "image.tag=0.1.0",
		"--set", "autoscaling.minReplicas=4", "--set", "autoscaling.maxReplicas=20",
		"--set-file", "config="+overlayDir+"/callout-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dep := mustDeployment(t, m, "callout-proxy")
	wantChecks(t, []check{
		{"image", dep.Spec.Template.Spec.Containers[0].Image, "registry.example.com/platform/callout-proxy:0.1.0"},
		{"hpa min", *m.HPAs[0].Spec.MinReplicas, int32(4)},
		{"hpa max", m.HPAs[0].Spec.MaxReplicas, int32(20)},
		{"config", m.ConfigMaps[0].Data["config.yaml"], string(config)},
	})
}
