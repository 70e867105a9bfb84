package k8scheck

import (
	"fmt"
	"path"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Want is what Check requires of a rendering.
type Want struct {
	// Name is the name of the Deployment, its container, the Service, the
	// PodDisruptionBudget, the HorizontalPodAutoscaler and the NetworkPolicy.
	Name string
	// MinReplicas is the least HPA minReplicas (and the least Deployment
	// replicas when no HPA targets it).
	MinReplicas int32
	// HTTPPort and AdminPort are the container ports of the callout
	// listener (probes, Service) and of the admin listener (/metrics, the
	// admin API: never in the Service, only the monitoring namespace).
	HTTPPort, AdminPort int32
	// MonitoringNamespace is the only namespace allowed to reach AdminPort.
	MonitoringNamespace string
}

// DefaultWant is the requirement: "callout-proxy", at least 3
// replicas, ports 8080 and 8081, Prometheus in the "monitoring" namespace.
func DefaultWant() Want {
	return Want{Name: "callout-proxy", MinReplicas: 3, HTTPPort: 8080, AdminPort: 8081,
		MonitoringNamespace: "monitoring"}
}

// DrainSlack is how much longer than the longest attempt_timeout the proxy
// waits for in-flight callouts after SIGTERM (drainGrace in
// cmd/callout-proxy/serve.go: the longest attempt limit + 5 s).
const DrainSlack = 5 * time.Second

// checker collects problems, one sentence each.
type checker struct {
	want     Want
	problems []string
}

func (c *checker) addf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// Check returns every way m breaks what deploy/README.md promises of the
// Kubernetes manifests; none means it keeps them all. It never stops at the
// first problem.
func Check(m *Manifests, w Want) []string {
	c := &checker{want: w}
	dep := findDeployment(m, w.Name)
	if dep == nil {
		c.addf("no Deployment %q", w.Name)
		return c.problems
	}
	c.checkDeployment(m, dep)
	labels := dep.Spec.Template.Labels
	c.checkService(m, labels)
	c.checkPDB(m, labels)
	c.checkHPA(m, dep)
	c.checkNetworkPolicy(m, labels)
	c.checkNamespaces(m)
	return c.problems
}

// checkDeployment checks replicas, selector, the container, the shutdown
// timing and the configuration it mounts.
func (c *checker) checkDeployment(m *Manifests, dep *appsv1.Deployment) {
	switch hpa := hpaOf(m, dep); {
	case hpa != nil && dep.Spec.Replicas != nil:
		// kubectl apply would set the count back to this on every apply,
		// undoing the autoscaler (Kubernetes documentation, "Horizontal Pod
		// Autoscaling", "Migrating Deployments and StatefulSets to
		// horizontal autoscaling").
		c.addf("Deployment sets replicas %d beside HorizontalPodAutoscaler %q: every apply resets the autoscaled count",
			*dep.Spec.Replicas, hpa.Name)
	case hpa == nil && (dep.Spec.Replicas == nil || *dep.Spec.Replicas < c.want.MinReplicas):
		c.addf("Deployment replicas %s, want at least %d", int32s(dep.Spec.Replicas), c.want.MinReplicas)
	}
	if dep.Spec.Selector == nil || !selects(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) {
		c.addf("Deployment selector does not select its own pod template's labels")
	}
	pod := &dep.Spec.Template.Spec
	ctr := findContainer(pod, c.want.Name)
	if ctr == nil {
		c.addf("Deployment has no container %q", c.want.Name)
		return
	}
	c.checkPorts(ctr)
	c.checkProbes(ctr)
	c.checkResources(ctr)
	c.checkSecurity(pod, ctr)
	c.checkServiceAccount(m, pod)
	cfg := c.mountedConfig(m, pod, ctr)
	if cfg == nil {
		return
	}
	c.checkConfigAgrees(cfg, pod, ctr)
	c.checkGrace(cfg, pod, ctr)
	c.checkRedis(m, cfg, ctr)
}

func (c *checker) checkPorts(ctr *corev1.Container) {
	for _, p := range []struct {
		name string
		port int32
	}{{"http", c.want.HTTPPort}, {"admin", c.want.AdminPort}} {
		if got, ok := namedPort(ctr, p.name); !ok || got != p.port {
			c.addf("container port %q is %d, want %d", p.name, got, p.port)
		}
	}
}

func (c *checker) checkProbes(ctr *corev1.Container) {
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"readinessProbe", "/readyz", ctr.ReadinessProbe}, {"livenessProbe", "/healthz", ctr.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			c.addf("%s is not an httpGet probe", p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			c.addf("%s path %q, want %q", p.kind, p.probe.HTTPGet.Path, p.path)
		}
		if port := resolvePort(ctr, p.probe.HTTPGet.Port); port != c.want.HTTPPort {
			c.addf("%s port resolves to %d, want the callout listener %d", p.kind, port, c.want.HTTPPort)
		}
	}
}

func (c *checker) checkResources(ctr *corev1.Container) {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := ctr.Resources.Requests[name]
		lim, hasLim := ctr.Resources.Limits[name]
		switch {
		case !hasReq || req.IsZero():
			c.addf("no %s request", name)
		case !hasLim || lim.IsZero():
			c.addf("no %s limit", name)
		case req.Cmp(lim) > 0:
			c.addf("%s request %s above its limit %s", name, req.String(), lim.String())
		}
	}
}

func (c *checker) checkSecurity(pod *corev1.PodSpec, ctr *corev1.Container) {
	nonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
	sc := ctr.SecurityContext
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		c.addf("runAsNonRoot is not true")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		c.addf("readOnlyRootFilesystem is not true")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.addf("allowPrivilegeEscalation is not false")
	}
}

func (c *checker) checkServiceAccount(m *Manifests, pod *corev1.PodSpec) {
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		c.addf("the pod mounts a service account token; the proxy never calls the Kubernetes API")
	}
	if pod.ServiceAccountName == "" {
		return
	}
	for _, sa := range m.ServiceAccounts {
		if sa.Name == pod.ServiceAccountName {
			return
		}
	}
	c.addf("ServiceAccount %q is not in the manifests", pod.ServiceAccountName)
}

// checkGrace: the pod must outlive preStop, then the proxy's drain.
func (c *checker) checkGrace(cfg *ProxyConfig, pod *corev1.PodSpec, ctr *corev1.Container) {
	var preStop time.Duration
	if ctr.Lifecycle == nil || ctr.Lifecycle.PreStop == nil || ctr.Lifecycle.PreStop.Sleep == nil ||
		ctr.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		c.addf("no preStop sleep: the pod would close its listener before the Service stops sending to it")
	} else {
		preStop = time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	need := preStop + cfg.LongestAttempt + DrainSlack
	if pod.TerminationGracePeriodSeconds == nil ||
		time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= need {
		c.addf("terminationGracePeriodSeconds %s must exceed preStop %s + longest attempt_timeout %s + drain %s = %s",
			int64s(pod.TerminationGracePeriodSeconds), preStop, cfg.LongestAttempt, DrainSlack, need)
	}
}

// checkNamespaces: an overlay puts every object in one namespace.
func (c *checker) checkNamespaces(m *Manifests) {
	seen := map[string]bool{}
	for _, ns := range namespacesOf(m) {
		seen[ns] = true
	}
	if len(seen) > 1 {
		c.addf("objects are spread over namespaces %v", sortedKeys(seen))
	}
}

func findDeployment(m *Manifests, name string) *appsv1.Deployment {
	for i := range m.Deployments {
		if m.Deployments[i].Name == name {
			return &m.Deployments[i]
		}
	}
	return nil
}

func findContainer(pod *corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}

// namedPort returns the containerPort of the port called name.
func namedPort(ctr *corev1.Container, name string) (int32, bool) {
	for _, p := range ctr.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// resolvePort turns a probe's or Service's port (number or name) into the
// container port it reaches, 0 when a name is unknown.
func resolvePort(ctr *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	port, _ := namedPort(ctr, p.StrVal)
	return port
}

// selects reports whether a non-empty label selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// underMount returns the volume mount whose path contains file, or nil.
func underMount(ctr *corev1.Container, file string) *corev1.VolumeMount {
	for i, vm := range ctr.VolumeMounts {
		if path.Dir(file) == path.Clean(vm.MountPath) {
			return &ctr.VolumeMounts[i]
		}
	}
	return nil
}

func int32s(p *int32) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func int64s(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
