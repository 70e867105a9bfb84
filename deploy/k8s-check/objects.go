package k8scheck

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkService: the Service selects the pods and carries the callout port,
// never the admin port.
func (c *checker) checkService(m *Manifests, podLabels map[string]string) {
	var svc *corev1.Service
	for i := range m.Services {
		if m.Services[i].Name == c.want.Name {
			svc = &m.Services[i]
		}
	}
	if svc == nil {
		c.addf("no Service %q", c.want.Name)
		return
	}
	if !selects(svc.Spec.Selector, podLabels) {
		c.addf("Service selector %v does not select the pods %v", svc.Spec.Selector, podLabels)
	}
	http := false
	for _, p := range svc.Spec.Ports {
		switch c.servicePort(p.TargetPort, p.Port) {
		case c.want.HTTPPort:
			http = true
		case c.want.AdminPort:
			c.addf("Service port %q exposes the admin port %d", p.Name, c.want.AdminPort)
		}
	}
	if !http {
		c.addf("Service does not expose the callout port %d", c.want.HTTPPort)
	}
}

// servicePort resolves a Service port's target (defaulting to its port) to
// the proxy container's port, by number or by the names "http"/"admin".
func (c *checker) servicePort(target intstr.IntOrString, port int32) int32 {
	switch {
	case target.Type == intstr.String && target.StrVal == "http":
		return c.want.HTTPPort
	case target.Type == intstr.String && target.StrVal == "admin":
		return c.want.AdminPort
	case target.Type == intstr.Int && target.IntVal != 0:
		return target.IntVal
	case target.Type == intstr.String:
		return 0
	}
	return port
}

// checkPDB: a budget over the pods that lets one go and keeps the rest.
func (c *checker) checkPDB(m *Manifests, podLabels map[string]string) {
	for _, pdb := range m.PDBs {
		if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
			continue
		}
		mu, ma := pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable
		switch {
		case mu != nil && mu.Type == intstr.Int && mu.IntVal >= 1 && mu.IntVal < c.want.MinReplicas:
		case ma != nil && ma.Type == intstr.Int && ma.IntVal >= 1 && ma.IntVal < c.want.MinReplicas:
		case mu != nil && mu.Type == intstr.String, ma != nil && ma.Type == intstr.String:
		default:
			c.addf("PodDisruptionBudget %q must allow between 1 and %d voluntary disruptions",
				pdb.Name, c.want.MinReplicas-1)
		}
		return
	}
	c.addf("no PodDisruptionBudget selects the pods")
}

// hpaOf returns the autoscaler that targets dep, or nil.
func hpaOf(m *Manifests, dep *appsv1.Deployment) *autoscalingv2.HorizontalPodAutoscaler {
	for i, h := range m.HPAs {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind == "Deployment" && ref.Name == dep.Name && ref.APIVersion == "apps/v1" {
			return &m.HPAs[i]
		}
	}
	return nil
}

// checkHPA: an autoscaler on the Deployment that never goes below the
// minimum replicas.
func (c *checker) checkHPA(m *Manifests, dep *appsv1.Deployment) {
	if h := hpaOf(m, dep); h != nil {
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < c.want.MinReplicas {
			c.addf("HPA minReplicas %s, want at least %d", int32s(h.Spec.MinReplicas), c.want.MinReplicas)
		} else if h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			c.addf("HPA maxReplicas %d below minReplicas %d", h.Spec.MaxReplicas, *h.Spec.MinReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			c.addf("HPA %q has no metrics", h.Name)
		}
		return
	}
	c.addf("no HorizontalPodAutoscaler targets Deployment %q", dep.Name)
}

// checkNetworkPolicy: a policy on exactly the proxy's pods that admits the
// callout port and lets only the monitoring namespace reach the admin port.
func (c *checker) checkNetworkPolicy(m *Manifests, podLabels map[string]string) {
	found := false
	for _, np := range m.NetworkPolicies {
		if !selects(np.Spec.PodSelector.MatchLabels, podLabels) {
			continue
		}
		found = true
		if !hasIngressType(np.Spec.PolicyTypes) {
			c.addf("NetworkPolicy %q does not restrict Ingress", np.Name)
		}
		http := false
		for i, rule := range np.Spec.Ingress {
			if c.rulePorts(rule, c.want.HTTPPort, "http") {
				http = true
			}
			if c.rulePorts(rule, c.want.AdminPort, "admin") && !c.onlyMonitoring(rule.From) {
				c.addf("NetworkPolicy %q ingress rule %d admits the admin port from beyond namespace %q",
					np.Name, i, c.want.MonitoringNamespace)
			}
		}
		if !http {
			c.addf("NetworkPolicy %q admits no traffic to the callout port", np.Name)
		}
	}
	if !found {
		c.addf("no NetworkPolicy selects the pods (an empty podSelector would select every pod of the namespace)")
	}
}

func hasIngressType(types []networkingv1.PolicyType) bool {
	for _, t := range types {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return len(types) == 0 // the API defaults to Ingress
}

// rulePorts reports whether an ingress rule admits port (a rule with no
// ports admits every port).
func (c *checker) rulePorts(rule networkingv1.NetworkPolicyIngressRule, port int32, name string) bool {
	if len(rule.Ports) == 0 {
		return true
	}
	for _, p := range rule.Ports {
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String && p.Port.StrVal == name:
			return true
		case p.Port.Type == intstr.Int && p.Port.IntVal == port:
			return true
		case p.Port.Type == intstr.Int && p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort:
			return true
		}
	}
	return false
}

// onlyMonitoring reports whether every peer is exactly the monitoring
// namespace (by its kubernetes.io/metadata.name label), with no ipBlock and
// no podSelector-only peer. No peers at all means everyone.
func (c *checker) onlyMonitoring(from []networkingv1.NetworkPolicyPeer) bool {
	if len(from) == 0 {
		return false
	}
	for _, p := range from {
		ns := p.NamespaceSelector
		if p.IPBlock != nil || ns == nil || len(ns.MatchExpressions) > 0 ||
			len(ns.MatchLabels) != 1 || ns.MatchLabels["kubernetes.io/metadata.name"] != c.want.MonitoringNamespace {
			return false
		}
	}
	return true
}

// namespacesOf lists the namespace of every namespaced object.
func namespacesOf(m *Manifests) []string {
	return slices.Concat(namespaces(m.ServiceAccounts), namespaces(m.ConfigMaps), namespaces(m.Services),
		namespaces(m.Deployments), namespaces(m.StatefulSets), namespaces(m.PDBs), namespaces(m.HPAs),
		namespaces(m.NetworkPolicies))
}

// namespaces lists the namespace of each of objs.
func namespaces[T any, P interface {
	*T
	GetNamespace() string
}](objs []T) []string {
	out := make([]string, len(objs))
	for i := range objs {
		out[i] = P(&objs[i]).GetNamespace()
	}
	return out
}
