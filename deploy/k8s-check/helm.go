package k8scheck

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/yaml"
)

// HelmKubeVersion is the Kubernetes version `helm template` renders for:
// the chart requires 1.30 (the preStop sleep action), and without a
// cluster helm assumes an older one.
const HelmKubeVersion = "1.30.0"

// RenderHelm runs `helm template RELEASE CHART --kube-version 1.30.0
// ARGS...` with the helm binary at helm and decodes every object it prints
// with Decode, strictly, as Render does for kustomize. It returns helm's
// error with its output, or the first decoding error.
func RenderHelm(helm, release, chart string, args ...string) (*Manifests, error) {
	cmd := exec.Command(helm, append([]string{"template", release, chart, "--kube-version", HelmKubeVersion}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", chart, err, stderr.String())
	}
	m := &Manifests{}
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("helm template output: %w", err)
		}
		if head.Kind == "" {
			continue // a comment-only document
		}
		if err := m.Decode(head.APIVersion, head.Kind, []byte(doc)); err != nil {
			return nil, fmt.Errorf("%s %s: %w", head.Kind, head.Metadata.Name, err)
		}
	}
	return m, nil
}
