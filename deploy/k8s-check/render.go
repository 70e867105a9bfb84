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
	k, ok := m.kinds()[kind]
	if !ok {
		return fmt.Errorf("kind %q is not one the checks know; add it to k8scheck", kind)
	}
	if apiVersion != k.apiVersion {
		return fmt.Errorf("apiVersion %q, want %q", apiVersion, k.apiVersion)
	}
	return k.decode(doc)
}

// kind is a kind the checks know: the apiVersion it must be written in,
// and how to decode one object of it into m.
type kind struct {
	apiVersion string
	decode     func(doc []byte) error
}

// kinds are the kinds the checks know, each with its list in m.
func (m *Manifests) kinds() map[string]kind {
	return map[string]kind{
		"Namespace":               {"v1", into(&m.Namespaces)},
		"ServiceAccount":          {"v1", into(&m.ServiceAccounts)},
		"ConfigMap":               {"v1", into(&m.ConfigMaps)},
		"Service":                 {"v1", into(&m.Services)},
		"Deployment":              {"apps/v1", into(&m.Deployments)},
		"StatefulSet":             {"apps/v1", into(&m.StatefulSets)},
		"PodDisruptionBudget":     {"policy/v1", into(&m.PDBs)},
		"HorizontalPodAutoscaler": {"autoscaling/v2", into(&m.HPAs)},
		"NetworkPolicy":           {"networking.k8s.io/v1", into(&m.NetworkPolicies)},
	}
}

// into returns a decoder that strictly decodes a doc into a new T and
// appends it to *list.
func into[T any](list *[]T) func(doc []byte) error {
	return func(doc []byte) error {
		var v T
		if err := yaml.UnmarshalStrict(doc, &v); err != nil {
			return fmt.Errorf("strict decoding: %w", err)
		}
		*list = append(*list, v)
		return nil
	}
}
