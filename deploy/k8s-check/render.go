// Package k8scheck renders the proxy's Kubernetes manifests with kustomize's
// Go API, decodes every object strictly into its k8s.io/api type, and checks
// the properties deploy/README.md promises (replicas, probes, resources,
// shutdown timing, disruption budget, autoscaler, Service, ConfigMap,
// Secret references, NetworkPolicy). It also checks the compose file. It is
// a module of its own so the proxy's module never depends on Kubernetes
// libraries; deploy/check.sh runs its tests.
package k8scheck

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Manifests are the objects of one kustomize build, decoded into their
// k8s.io/api types, in build order.
type Manifests struct {
	Namespaces      []corev1.Namespace
	ServiceAccounts []corev1.ServiceAccount
	ConfigMaps      []corev1.ConfigMap
	Services        []corev1.Service
	Deployments     []appsv1.Deployment
	StatefulSets    []appsv1.StatefulSet
	PDBs            []policyv1.PodDisruptionBudget
	HPAs            []autoscalingv2.HorizontalPodAutoscaler
	NetworkPolicies []networkingv1.NetworkPolicy
}

// Render builds the kustomization in dir (a base or an overlay) from disk,
// as `kustomize build dir` does with default options (load restrictions
// RootOnly, no plugins), and decodes every object with Decode. It returns
// the first error of the build or of a decoding.
func Render(dir string) (*Manifests, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	m := &Manifests{}
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		gvk := r.GetGvk()
		if err := m.Decode(gvk.ApiVersion(), gvk.Kind, b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, r.GetName(), err)
		}
	}
	return m, nil
}

// Decode decodes one object's YAML strictly — an unknown or misspelled
// field, a duplicate key or a wrong type is an error — into the k8s.io/api
// type of its kind and appends it to m. It refuses a kind it does not know
// and an apiVersion other than the one it decodes (apps/v1 Deployment,
// apps/v1 StatefulSet, autoscaling/v2 HorizontalPodAutoscaler, policy/v1 PodDisruptionBudget,
// networking.k8s.io/v1 NetworkPolicy, v1 for the core kinds).
func (m *Manifests) Decode(apiVersion, kind string, doc []byte) error {
	want, ok := apiVersionOf(kind)
	if !ok {
		return fmt.Errorf("kind %q is not one the checks know; add it to k8scheck", kind)
	}
	if apiVersion != want {
		return fmt.Errorf("apiVersion %q, want %q", apiVersion, want)
	}
	var err error
	switch kind {
	case "Namespace":
		m.Namespaces, err = decodeAppend(doc, m.Namespaces)
	case "ServiceAccount":
		m.ServiceAccounts, err = decodeAppend(doc, m.ServiceAccounts)
	case "ConfigMap":
		m.ConfigMaps, err = decodeAppend(doc, m.ConfigMaps)
	case "Service":
		m.Services, err = decodeAppend(doc, m.Services)
	case "Deployment":
		m.Deployments, err = decodeAppend(doc, m.Deployments)
	case "StatefulSet":
		m.StatefulSets, err = decodeAppend(doc, m.StatefulSets)
	case "PodDisruptionBudget":
		m.PDBs, err = decodeAppend(doc, m.PDBs)
	case "HorizontalPodAutoscaler":
		m.HPAs, err = decodeAppend(doc, m.HPAs)
	case "NetworkPolicy":
		m.NetworkPolicies, err = decodeAppend(doc, m.NetworkPolicies)
	}
	return err
}

// apiVersionOf returns the apiVersion a known kind must be written in, and
// false for a kind the checks do not know.
func apiVersionOf(kind string) (string, bool) {
	switch kind {
	case "Namespace", "ServiceAccount", "ConfigMap", "Service":
		return "v1", true
	case "Deployment", "StatefulSet":
		return "apps/v1", true
	case "PodDisruptionBudget":
		return "policy/v1", true
	case "HorizontalPodAutoscaler":
		return "autoscaling/v2", true
	case "NetworkPolicy":
		return "networking.k8s.io/v1", true
	}
	return "", false
}

// decodeAppend strictly decodes doc into a new T and appends it to list.
func decodeAppend[T any](doc []byte, list []T) ([]T, error) {
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		return list, fmt.Errorf("strict decoding: %w", err)
	}
	return append(list, v), nil
}
