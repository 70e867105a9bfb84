package k8scheck

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ProxyConfig is what a deployment must provide for one Callout Proxy
// configuration file: its listeners, its store, the environment variables
// and files it reads secrets from, and its longest attempt limit. The proxy
// itself validates the file fully (config.Load; deploy/configs_test.go in
// the main module loads every configuration under deploy/); this is only
// the part a manifest or a compose file has to agree with.
type ProxyConfig struct {
	// Listen and AdminListen are host:port as written (README "Top level").
	Listen, AdminListen string
	// Redis is true when redis.url, redis.cluster or redis.sentinel is
	// set: without it the proxy runs on an embedded, non-durable store that
	// no two replicas share.
	Redis bool
	// RedisHosts are the hosts of redis.url, redis.cluster and
	// redis.sentinel.addresses.
	RedisHosts []string
	// SentinelMaster and SentinelAddresses are redis.sentinel.master_name
	// and its addresses (host:port) as written; Durability is
	// redis.durability ("" when absent, which the proxy reads as local).
	SentinelMaster    string
	SentinelAddresses []string
	Durability        string
	// RedisPasswordEnv is redis.password_env.
	RedisPasswordEnv string
	// Env are the environment variables the file names (every *_env key and
	// every {env: VAR} secret), sorted, without duplicates.
	Env []string
	// Files are the absolute paths the file names (every *_file and *_files
	// key and every {file: PATH} secret), sorted, without duplicates.
	Files []string
	// LongestAttempt is the longest attempt_timeout in force: the policy's
	// (default 15 s, contract §3) or any endpoint's override.
	LongestAttempt time.Duration
	// HasAdminToken, HasCallerKey and HasSalesforce report an admin token,
	// caller-JWT key material (certificate_files or an HS256 secret, at the
	// top of auth or in an auth.issuer_keys entry) and a
	// salesforce section.
	HasAdminToken, HasCallerKey, HasSalesforce bool
}

// defaultAttemptTimeout is policy.attempt_timeout's default (contract §3).
const defaultAttemptTimeout = 15 * time.Second

// ParseProxyConfig reads the parts of a Callout Proxy configuration that a
// deployment must agree with. It returns an error when the text is not a
// YAML mapping or a duration in it does not parse.
func ParseProxyConfig(text []byte) (*ProxyConfig, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("proxy configuration: %w", err)
	}
	c := &ProxyConfig{
		Listen: str(doc["listen"]), AdminListen: str(doc["admin_listen"]),
		HasSalesforce: doc["salesforce"] != nil,
	}
	redis, _ := doc["redis"].(map[string]any)
	if u := str(redis["url"]); u != "" {
		c.Redis = true
		c.RedisHosts = append(c.RedisHosts, redisURLHost(u))
	}
	if seeds, ok := redis["cluster"].([]any); ok && len(seeds) > 0 {
		c.Redis = true
		for _, s := range seeds {
			host, _, _ := net.SplitHostPort(str(s))
			c.RedisHosts = append(c.RedisHosts, host)
		}
	}
	if sentinel, ok := redis["sentinel"].(map[string]any); ok {
		c.Redis = true
		c.SentinelMaster = str(sentinel["master_name"])
		addrs, _ := sentinel["addresses"].([]any)
		for _, a := range addrs {
			c.SentinelAddresses = append(c.SentinelAddresses, str(a))
			host, _, _ := net.SplitHostPort(str(a))
			c.RedisHosts = append(c.RedisHosts, host)
		}
	}
	c.Durability = str(redis["durability"])
	c.RedisPasswordEnv = str(redis["password_env"])
	auth, _ := doc["auth"].(map[string]any)
	c.HasCallerKey = hasKeyMaterial(auth)
	bound, _ := auth["issuer_keys"].([]any)
	for _, b := range bound {
		entry, _ := b.(map[string]any)
		c.HasCallerKey = c.HasCallerKey || hasKeyMaterial(entry)
	}
	admin, _ := doc["admin"].(map[string]any)
	tokens, _ := admin["tokens"].([]any)
	c.HasAdminToken = len(tokens) > 0
	env, files := map[string]bool{}, map[string]bool{}
	collectSecrets(doc, env, files)
	c.Env, c.Files = sortedKeys(env), sortedKeys(files)
	longest, err := longestAttempt(doc)
	if err != nil {
		return nil, err
	}
	c.LongestAttempt = longest
	return c, nil
}

// hasKeyMaterial reports caller-JWT key material in an auth section or one
// of its auth.issuer_keys entries (docs/configuration.md "auth"):
// certificate_files or an HS256 secret.
func hasKeyMaterial(m map[string]any) bool {
	return m["certificate_files"] != nil || m["hs256_secret_env"] != nil || m["hs256_secret_file"] != nil
}

// collectSecrets walks v and records every environment variable and file
// the configuration reads: keys ending in _env, _file and _files, and the
// {env: VAR} / {file: PATH} secret references (README "Configuration
// reference").
func collectSecrets(v any, env, files map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			s, isString := child.(string)
			switch {
			case isString && (k == "env" || strings.HasSuffix(k, "_env")):
				env[s] = true
			case isString && (k == "file" || strings.HasSuffix(k, "_file")):
				files[s] = true
			case strings.HasSuffix(k, "_files"):
				list, _ := child.([]any)
				for _, f := range list {
					files[str(f)] = true
				}
			default:
				collectSecrets(child, env, files)
			}
		}
	case []any:
		for _, child := range t {
			collectSecrets(child, env, files)
		}
	}
}

// longestAttempt returns the longest attempt_timeout of the policy and the
// endpoints' overrides.
func longestAttempt(doc map[string]any) (time.Duration, error) {
	policy, _ := doc["policy"].(map[string]any)
	longest, err := duration(policy, "attempt_timeout", "policy", defaultAttemptTimeout)
	if err != nil {
		return 0, err
	}
	endpoints, _ := doc["endpoints"].(map[string]any)
	for name, e := range endpoints {
		ep, _ := e.(map[string]any)
		d, err := duration(ep, "attempt_timeout", "endpoints."+name, 0)
		if err != nil {
			return 0, err
		}
		longest = max(longest, d)
	}
	return longest, nil
}

// duration reads m[key] as a Go duration string (the proxy's only duration
// form), def when absent. A bare number is an error, as it is to the proxy.
func duration(m map[string]any, key, at string, def time.Duration) (time.Duration, error) {
	v, ok := m[key]
	if !ok {
		return def, nil
	}
	s, isString := v.(string)
	if !isString {
		return 0, fmt.Errorf("%s.%s: %v is not a duration string such as 15s", at, key, v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s.%s: %w", at, key, err)
	}
	return d, nil
}

// ListenPort returns the port of a host:port listener address, or an error
// when addr is not host:port with a numeric port.
func ListenPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// ListensOnAllInterfaces reports whether a listener address accepts
// connections from outside the container (host empty, 0.0.0.0 or ::).
func ListensOnAllInterfaces(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && (host == "0.0.0.0" || ListensOnEveryFamily(addr))
}

// ListensOnEveryFamily reports whether a listener address accepts
// connections on every address of the pod, IPv4 and IPv6, so that it works
// on IPv4, IPv6-only and dual-stack clusters: host empty or "::". Go's
// net.Listen opens one dual-stack socket for either (IPV6_V6ONLY off) where
// the kernel has IPv6; an empty host falls back to IPv4 where it has not.
// 0.0.0.0 is IPv4 only.
func ListensOnEveryFamily(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && (host == "" || host == "::")
}

// redisURLHost returns the host of redis://host:port/db, or "" when the URL
// does not have that shape.
func redisURLHost(u string) string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	hostport, _, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hostport, "@"); at >= 0 {
		hostport = hostport[at+1:]
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return host
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// sortedKeys is m's keys in order; never nil (an empty set is []string{}).
func sortedKeys(m map[string]bool) []string {
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(keys)
	return keys
}
