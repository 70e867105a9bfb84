package k8scheck

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// mountedConfig finds the file given to --config, checks that it comes from
// a ConfigMap of the manifests through a volume mount, and parses it. It
// returns nil (with the problem recorded) when any link is missing.
func (c *checker) mountedConfig(m *Manifests, pod *corev1.PodSpec, ctr *corev1.Container) *ProxyConfig {
	file := configArg(append(slices.Clone(ctr.Command), ctr.Args...))
	if file == "" {
		c.addf("the container is not started with --config FILE")
		return nil
	}
	vm := underMount(ctr, file)
	if vm == nil {
		c.addf("--config %s is under no volume mount", file)
		return nil
	}
	vol := findVolume(pod, vm.Name)
	if vol == nil || vol.ConfigMap == nil {
		c.addf("--config %s: volume %q is not a ConfigMap volume", file, vm.Name)
		return nil
	}
	cm := findConfigMap(m, vol.ConfigMap.Name)
	if cm == nil {
		c.addf("ConfigMap %q (volume %q) is not in the manifests", vol.ConfigMap.Name, vm.Name)
		return nil
	}
	text, ok := cm.Data[path.Base(file)]
	if !ok {
		c.addf("ConfigMap %q has no key %q for --config %s", cm.Name, path.Base(file), file)
		return nil
	}
	cfg, err := ParseProxyConfig([]byte(text))
	if err != nil {
		c.addf("ConfigMap %q key %q: %v", cm.Name, path.Base(file), err)
		return nil
	}
	return cfg
}

// checkConfigAgrees checks the configuration against the pod: listeners on
// the container ports and on all interfaces, a shared Redis, the secrets it
// needs (caller key, admin token, Salesforce) each provided by a Secret.
func (c *checker) checkConfigAgrees(cfg *ProxyConfig, pod *corev1.PodSpec, ctr *corev1.Container) {
	for _, l := range []struct {
		key, addr string
		port      int32
	}{{"listen", cfg.Listen, c.want.HTTPPort}, {"admin_listen", cfg.AdminListen, c.want.AdminPort}} {
		port, err := ListenPort(l.addr)
		if err != nil || int32(port) != l.port {
			c.addf("config %s %q does not listen on container port %d", l.key, l.addr, l.port)
		}
		if !ListensOnEveryFamily(l.addr) {
			c.addf("config %s %q does not listen on every address of the pod, IPv4 and IPv6 "+
				"(use \":%d\" or \"[::]:%d\"; 0.0.0.0 fails on IPv6-only clusters)", l.key, l.addr, l.port, l.port)
		}
	}
	if !cfg.Redis {
		c.addf("config has no redis.url, redis.cluster or redis.sentinel: replicas would not share a store")
	}
	if !cfg.HasCallerKey || !cfg.HasAdminToken || !cfg.HasSalesforce {
		c.addf("config lacks caller-JWT key material (%t), an admin token (%t) or a salesforce section (%t)",
			cfg.HasCallerKey, cfg.HasAdminToken, cfg.HasSalesforce)
	}
	for _, name := range cfg.Env {
		c.checkEnvFromSecret(ctr, name)
	}
	for _, file := range cfg.Files {
		c.checkFileFromSecret(pod, ctr, file)
	}
}

// checkEnvFromSecret: a variable the configuration reads a secret from
// must come from a Secret, never a literal in the manifest.
func (c *checker) checkEnvFromSecret(ctr *corev1.Container, name string) {
	for _, e := range ctr.Env {
		if e.Name != name {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" {
			c.addf("env %s is read by the config but is not a secretKeyRef", name)
		}
		return
	}
	c.addf("env %s is read by the config but the container does not set it", name)
}

// checkFileFromSecret: a file the configuration reads must be in a Secret
// volume (and, when the volume lists items, be one of them).
func (c *checker) checkFileFromSecret(pod *corev1.PodSpec, ctr *corev1.Container, file string) {
	vm := underMount(ctr, file)
	if vm == nil {
		c.addf("file %s is read by the config but is under no volume mount", file)
		return
	}
	vol := findVolume(pod, vm.Name)
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName == "" {
		c.addf("file %s is read by the config but volume %q is not a Secret", file, vm.Name)
		return
	}
	if len(vol.Secret.Items) == 0 {
		return
	}
	for _, it := range vol.Secret.Items {
		if it.Path == path.Base(file) {
			return
		}
	}
	c.addf("file %s is read by the config but Secret volume %q has no item with that path", file, vm.Name)
}

// configArg returns the value of --config (as "--config F" or
// "--config=F") in a command line, or "".
func configArg(args []string) string {
	for i, a := range args {
		if a == "--config" || a == "-config" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		for _, p := range []string{"--config=", "-config="} {
			if len(a) > len(p) && a[:len(p)] == p {
				return a[len(p):]
			}
		}
	}
	return ""
}

func findVolume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

func findConfigMap(m *Manifests, name string) *corev1.ConfigMap {
	for i := range m.ConfigMaps {
		if m.ConfigMaps[i].Name == name {
			return &m.ConfigMaps[i]
		}
	}
	return nil
}
