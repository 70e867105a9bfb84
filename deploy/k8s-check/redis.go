package k8scheck

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// RedisName is the name of the StatefulSet, its headless Service and its
// ConfigMap's prefix in deploy/k8s/redis.
const RedisName = "callout-redis"

// checkRedis checks the Redis StatefulSet of deploy/k8s/redis when the
// manifests have one (the base leaves Redis to the operator): three pods
// with a Redis and a Sentinel each, one per node, a volume for /data, the
// persistence deploy/README.md requires (AOF, appendfsync always,
// noeviction), a Sentinel quorum of a majority, and a proxy configuration
// that uses those Sentinels with durability replicated and the same
// password.
func (c *checker) checkRedis(m *Manifests, cfg *ProxyConfig, proxy *corev1.Container) {
	var ss *appsv1.StatefulSet
	for i := range m.StatefulSets {
		if m.StatefulSets[i].Name == RedisName {
			ss = &m.StatefulSets[i]
		}
	}
	if ss == nil {
		return
	}
	replicas := int32(1)
	if ss.Spec.Replicas != nil {
		replicas = *ss.Spec.Replicas
	}
	if replicas != 3 {
		c.addf("StatefulSet %s has %d pods, want 3 (a primary, two replicas, three Sentinels)", RedisName, replicas)
	}
	pod := &ss.Spec.Template.Spec
	redis, sentinel := findContainer(pod, "redis"), findContainer(pod, "sentinel")
	if redis == nil || sentinel == nil {
		c.addf("StatefulSet %s needs containers \"redis\" and \"sentinel\"", RedisName)
		return
	}
	if !slices.Contains(sentinel.Command, "--sentinel") {
		c.addf("StatefulSet %s: container sentinel does not run redis-server --sentinel", RedisName)
	}
	for _, ctr := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		if !QualifiedImage(ctr.Image) {
			c.addf("StatefulSet %s: container %s image %q is a short name (write docker.io/library/...)", RedisName, ctr.Name, ctr.Image)
		}
	}
	c.checkRedisPlacement(ss, redis)
	c.checkRedisService(m, ss)
	conf := redisConfigMap(m, pod)
	if conf == nil {
		c.addf("StatefulSet %s mounts no ConfigMap of the manifests with redis.conf and sentinel.conf", RedisName)
		return
	}
	directives := RedisDirectives(conf.Data["redis.conf"])
	for key, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"} {
		if got := directives[key]; got != want {
			c.addf("%s redis.conf: %s %q, want %q", conf.Name, key, got, want)
		}
	}
	master, quorum := sentinelMonitor(conf.Data["sentinel.conf"])
	if quorum != int(replicas)/2+1 {
		c.addf("%s sentinel.conf: quorum %d, want a majority of %d Sentinels (%d)", conf.Name, quorum, replicas, int(replicas)/2+1)
	}
	c.checkProxyUsesSentinels(ss, cfg, master, replicas)
	c.checkRedisPassword(redis, proxy, cfg)
}

// checkRedisPlacement: one pod per node, and the data volume under /data.
func (c *checker) checkRedisPlacement(ss *appsv1.StatefulSet, redis *corev1.Container) {
	aff := ss.Spec.Template.Spec.Affinity
	perNode := false
	if aff != nil && aff.PodAntiAffinity != nil {
		for _, t := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.TopologyKey == "kubernetes.io/hostname" && t.LabelSelector != nil &&
				selects(t.LabelSelector.MatchLabels, ss.Spec.Template.Labels) {
				perNode = true
			}
		}
	}
	if !perNode {
		c.addf("StatefulSet %s has no required pod anti-affinity on kubernetes.io/hostname: two copies could share a node", RedisName)
	}
	claimed := false
	for _, vct := range ss.Spec.VolumeClaimTemplates {
		for _, vm := range redis.VolumeMounts {
			if vm.Name == vct.Name && vm.MountPath == "/data" {
				claimed = true
			}
		}
	}
	if !claimed {
		c.addf("StatefulSet %s: /data of container redis is not a volumeClaimTemplate: the AOF would not survive the pod", RedisName)
	}
}

// checkRedisService: a headless Service named as the StatefulSet's
// serviceName, so every pod has a stable name, published while not ready.
func (c *checker) checkRedisService(m *Manifests, ss *appsv1.StatefulSet) {
	for _, s := range m.Services {
		if s.Name != ss.Spec.ServiceName {
			continue
		}
		if s.Spec.ClusterIP != corev1.ClusterIPNone || !s.Spec.PublishNotReadyAddresses {
			c.addf("Service %s must be headless (clusterIP: None) and publishNotReadyAddresses", s.Name)
		}
		return
	}
	c.addf("StatefulSet %s: no Service %q (its serviceName)", RedisName, ss.Spec.ServiceName)
}

// checkProxyUsesSentinels: the proxy names every Sentinel of the set by its
// stable name, the master name they monitor, and durability replicated.
func (c *checker) checkProxyUsesSentinels(ss *appsv1.StatefulSet, cfg *ProxyConfig, master string, replicas int32) {
	var want []string
	for i := range replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s.%s.svc:26379", ss.Name, i, ss.Spec.ServiceName, ss.Namespace))
	}
	if !slices.Equal(slices.Sorted(slices.Values(cfg.SentinelAddresses)), want) {
		c.addf("config redis.sentinel.addresses %v, want the Sentinels of StatefulSet %s: %v", cfg.SentinelAddresses, ss.Name, want)
	}
	if cfg.SentinelMaster != master {
		c.addf("config redis.sentinel.master_name %q, but the Sentinels monitor %q", cfg.SentinelMaster, master)
	}
	if cfg.Durability != "replicated" && cfg.Durability != "fsync" {
		c.addf("config redis.durability %q with Sentinel replicas: use replicated, or a failover loses acknowledged writes", cfg.Durability)
	}
}

// checkRedisPassword: Redis reads its password from the same Secret key as
// the proxy's redis.password_env.
func (c *checker) checkRedisPassword(redis, proxy *corev1.Container, cfg *ProxyConfig) {
	ref := func(ctr *corev1.Container, name string) *corev1.SecretKeySelector {
		for _, e := range ctr.Env {
			if e.Name == name && e.ValueFrom != nil {
				return e.ValueFrom.SecretKeyRef
			}
		}
		return nil
	}
	r, p := ref(redis, "REDIS_PASSWORD"), ref(proxy, cfg.RedisPasswordEnv)
	if r == nil || p == nil || r.Name != p.Name || r.Key != p.Key {
		c.addf("container redis's REDIS_PASSWORD and the proxy's %s must come from the same Secret key", cfg.RedisPasswordEnv)
	}
}

// redisConfigMap returns the ConfigMap of a volume of pod that holds
// redis.conf and sentinel.conf.
func redisConfigMap(m *Manifests, pod *corev1.PodSpec) *corev1.ConfigMap {
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		if cm := findConfigMap(m, v.ConfigMap.Name); cm != nil && cm.Data["redis.conf"] != "" && cm.Data["sentinel.conf"] != "" {
			return cm
		}
	}
	return nil
}

// RedisDirectives reads a redis.conf: each directive's arguments, the
// last occurrence winning as in Redis; comments and blank lines skipped.
func RedisDirectives(conf string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(conf) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		out[strings.ToLower(f[0])] = strings.Join(f[1:], " ")
	}
	return out
}

// sentinelMonitor returns the master name and quorum of a sentinel.conf's
// "sentinel monitor NAME HOST PORT QUORUM" line (quorum 0 when absent).
func sentinelMonitor(conf string) (string, int) {
	for line := range strings.Lines(conf) {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "sentinel" && f[1] == "monitor" {
			var q int
			fmt.Sscan(f[5], &q)
			return f[2], q
		}
	}
	return "", 0
}
