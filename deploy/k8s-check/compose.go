package k8scheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// Compose is the part of a Compose file (compose-spec.io) the checks read.
// Other keys are allowed and ignored; the keys read must have these shapes
// (environment as a mapping, volumes and ports in the short syntax).
type Compose struct {
	Services map[string]ComposeService `json:"services"`
}

// ComposeService is one service of a Compose file.
type ComposeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	// Command is a string or a list of strings.
	Command     any               `json:"command"`
	Environment map[string]string `json:"environment"`
	// Volumes are "SOURCE:TARGET[:MODE]".
	Volumes []string `json:"volumes"`
	// Ports are "[IP:]HOST:CONTAINER".
	Ports  []string `json:"ports"`
	Deploy struct {
		Replicas *int `json:"replicas"`
	} `json:"deploy"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	User string `json:"user"`
	// Healthcheck.Test is a list: ["CMD", args...] or ["CMD-SHELL", line].
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
}

// ReadCompose reads and decodes a Compose file.
func ReadCompose(path string) (*Compose, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// interpolation matches a Compose value that is only a variable from the
// environment: ${NAME}, ${NAME:?message}, ${NAME?message}.
var interpolation = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*(:?\?[^}]*)?\}$`)

// CheckCompose returns every way c breaks what deploy/README.md promises of
// the Compose setup: at least two proxy replicas built from deploy/Dockerfile,
// the configuration mounted read-only from dir (the Compose file's
// directory), every secret it reads passed in from the environment, the
// admin port published on loopback only, and a Redis with AOF on and a data
// volume, which the proxies wait for.
func CheckCompose(c *Compose, dir string) []string {
	ch := &checker{}
	replicas := 0
	for name, svc := range c.Services {
		if !isProxyService(svc) {
			continue
		}
		replicas += 1
		if svc.Deploy.Replicas != nil {
			replicas += *svc.Deploy.Replicas - 1
		}
		ch.checkComposeProxy(c, name, svc, dir)
	}
	if replicas < 2 {
		ch.addf("compose runs %d proxy replicas, want at least 2", replicas)
	}
	for _, name := range sortedKeys(serviceNames(c)) {
		if img := c.Services[name].Image; img != "" && !QualifiedImage(img) {
			ch.addf("service %s: image %q is a short name; podman and buildah refuse it without a registries alias "+
				"(write docker.io/library/NAME:TAG, or localhost/NAME:TAG for a local build)", name, img)
		}
	}
	return ch.problems
}

func serviceNames(c *Compose) map[string]bool {
	out := map[string]bool{}
	for name := range c.Services {
		out[name] = true
	}
	return out
}

// QualifiedImage reports whether an image reference names its registry:
// its first path component is a host (has a "." or a ":", or is
// localhost), as in docker.io/library/redis:7.4 or localhost/app:dev.
// Podman and Buildah resolve a short name (redis:7.4) only through a
// registries.conf alias or an interactive prompt (containers-registries.conf(5),
// "Short-Name Aliasing"), and refuse it otherwise.
func QualifiedImage(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}

func isProxyService(s ComposeService) bool {
	return s.Build != nil && strings.HasSuffix(s.Build.Dockerfile, "deploy/Dockerfile")
}

// checkComposeProxy checks one proxy service and the Redis it uses.
func (ch *checker) checkComposeProxy(c *Compose, name string, svc ComposeService, dir string) {
	file := configArg(commandArgs(svc.Command))
	source := ""
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) == 3 && parts[1] == file && parts[2] == "ro" {
			source = parts[0]
		}
	}
	if file == "" || source == "" {
		ch.addf("service %s: --config %q is not a read-only bind mount", name, file)
		return
	}
	text, err := os.ReadFile(filepath.Join(dir, source))
	if err != nil {
		ch.addf("service %s: %v", name, err)
		return
	}
	cfg, err := ParseProxyConfig(text)
	if err != nil {
		ch.addf("service %s: %s: %v", name, source, err)
		return
	}
	if !ListensOnAllInterfaces(cfg.Listen) || !ListensOnAllInterfaces(cfg.AdminListen) {
		ch.addf("service %s: %s listens on %q / %q; the container needs 0.0.0.0", name, source, cfg.Listen, cfg.AdminListen)
	}
	for _, env := range cfg.Env {
		if !interpolation.MatchString(svc.Environment[env]) {
			ch.addf("service %s: environment %s must come from the host environment (${%s:?...}), got %q",
				name, env, env, svc.Environment[env])
		}
	}
	if len(cfg.Files) > 0 {
		ch.addf("service %s: %s reads files %v; pass secrets by environment in compose", name, source, cfg.Files)
	}
	if svc.User == "" || svc.User == "0" || strings.HasPrefix(svc.User, "root") || strings.HasPrefix(svc.User, "0:") {
		ch.addf("service %s: user %q, want a non-root uid", name, svc.User)
	}
	ch.checkComposeHealthcheck(name, svc)
	ch.checkComposeAdminPort(name, svc, cfg)
	if !cfg.Redis {
		ch.addf("service %s: %s configures no Redis: the replicas would not share a store", name, source)
	}
	for _, host := range cfg.RedisHosts {
		ch.checkComposeRedis(c, name, svc, host)
	}
}

// checkComposeHealthcheck: the proxy has a health check that runs in a
// distroless image: exec form (CMD, no shell), the binary's own
// healthcheck subcommand.
func (ch *checker) checkComposeHealthcheck(name string, svc ComposeService) {
	hc := svc.Healthcheck
	switch {
	case hc == nil || len(hc.Test) == 0:
		ch.addf("service %s: no healthcheck (use [\"CMD\", \"/usr/local/bin/callout-proxy\", \"healthcheck\", ...])", name)
	case hc.Test[0] != "CMD":
		ch.addf("service %s: healthcheck %q needs a shell, which the distroless image lacks; use the CMD form", name, hc.Test)
	case len(hc.Test) < 3 || !strings.HasSuffix(hc.Test[1], "/callout-proxy") || hc.Test[2] != "healthcheck":
		ch.addf("service %s: healthcheck %q does not run callout-proxy healthcheck", name, hc.Test)
	}
}

// checkComposeAdminPort: the admin port is published on loopback or not at all.
func (ch *checker) checkComposeAdminPort(name string, svc ComposeService, cfg *ProxyConfig) {
	admin, err := ListenPort(cfg.AdminListen)
	if err != nil {
		ch.addf("service %s: admin_listen %q: %v", name, cfg.AdminListen, err)
		return
	}
	for _, p := range svc.Ports {
		parts := strings.Split(p, ":")
		if parts[len(parts)-1] == fmt.Sprint(admin) && (len(parts) < 3 || parts[0] != "127.0.0.1") {
			ch.addf("service %s: port %q publishes the admin port beyond loopback", name, p)
		}
	}
}

// checkComposeRedis: the Redis a proxy names is a service of the file,
// the proxy waits for it, and it keeps an append-only file on a volume.
func (ch *checker) checkComposeRedis(c *Compose, proxy string, psvc ComposeService, host string) {
	rs, ok := c.Services[host]
	if !ok {
		ch.addf("service %s: Redis host %q is not a service of the compose file", proxy, host)
		return
	}
	if _, ok := psvc.DependsOn[host]; !ok {
		ch.addf("service %s does not depend_on %s", proxy, host)
	}
	if cmd := strings.Join(commandArgs(rs.Command), " "); !strings.Contains(cmd, "--appendonly yes") {
		ch.addf("service %s: command %q does not turn AOF on (--appendonly yes)", host, cmd)
	}
	data := false
	for _, v := range rs.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == "/data" {
			data = true
		}
	}
	if !data {
		ch.addf("service %s: no volume on /data: the append-only file would die with the container", host)
	}
}

// commandArgs splits a Compose command (string or list) into words; a
// string is split on white space.
func commandArgs(cmd any) []string {
	switch t := cmd.(type) {
	case string:
		return strings.Fields(t)
	case []any:
		var out []string
		for _, a := range t {
			out = append(out, strings.Fields(fmt.Sprint(a))...)
		}
		return out
	}
	return nil
}
