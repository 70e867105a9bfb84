package k8scheck

import (
	"reflect"
	"testing"
	"time"
)

func TestParseProxyConfig(t *testing.T) {
	tests := []struct {
		name, text string
		want       ProxyConfig
	}{
		{"defaults", "listen: 0.0.0.0:8080\nadmin_listen: 0.0.0.0:8081\n",
			ProxyConfig{Listen: "0.0.0.0:8080", AdminListen: "0.0.0.0:8081", Env: []string{}, Files: []string{},
				LongestAttempt: 15 * time.Second}},
		{"secrets everywhere", `
redis: {url: "redis://:pw@cache:6379/0", password_env: REDIS_PW}
auth: {hs256_secret_env: JWT, certificate_files: [/s/a.crt, /s/b.crt]}
admin: {tokens: [{name: a, token_env: ADMIN}, {name: b, token_file: /s/read.token}]}
endpoints:
  env:
    url: https://x
    headers: {Authorization: {env: UP_AUTH}, X-Key: {file: /s/key}}
salesforce: {client_id_env: SF_ID, private_key_file: /s/sf.key}
tls_cert_file: /s/tls.crt
`, ProxyConfig{Redis: true, RedisHosts: []string{"cache"}, RedisPasswordEnv: "REDIS_PW",
			Env:            []string{"ADMIN", "JWT", "REDIS_PW", "SF_ID", "UP_AUTH"},
			Files:          []string{"/s/a.crt", "/s/b.crt", "/s/key", "/s/read.token", "/s/sf.key", "/s/tls.crt"},
			LongestAttempt: 15 * time.Second, HasAdminToken: true, HasCallerKey: true, HasSalesforce: true}},
		{"keys bound to issuers", `
auth:
  issuers: [https://a.my.salesforce.com, https://b.my.salesforce.com]
  issuer_keys:
    - {issuer: https://a.my.salesforce.com, certificate_files: [/s/a.crt]}
    - {issuer: https://b.my.salesforce.com, hs256_secret_env: JWT_B}
`, ProxyConfig{Env: []string{"JWT_B"}, Files: []string{"/s/a.crt"}, LongestAttempt: 15 * time.Second,
			HasCallerKey: true}},
		{"longest attempt", `
redis: {cluster: ["r-0.r:6379", "r-1.r:6379"]}
policy: {attempt_timeout: 10s}
endpoints: {a: {attempt_timeout: 25s}, b: {attempt_timeout: 5s}, c: {url: https://c}}
`, ProxyConfig{Redis: true, RedisHosts: []string{"r-0.r", "r-1.r"}, Env: []string{}, Files: []string{},
			LongestAttempt: 25 * time.Second}},
		{"sentinel", `
redis:
  sentinel: {master_name: callouts, addresses: ["s-0.s:26379", "s-1.s:26379"], password_env: S_PW}
  durability: replicated
`, ProxyConfig{Redis: true, RedisHosts: []string{"s-0.s", "s-1.s"}, SentinelMaster: "callouts",
			SentinelAddresses: []string{"s-0.s:26379", "s-1.s:26379"}, Durability: "replicated",
			Env: []string{"S_PW"}, Files: []string{}, LongestAttempt: 15 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProxyConfig([]byte(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestParseProxyConfigErrors(t *testing.T) {
	for _, text := range []string{"- a list\n", "policy: {attempt_timeout: 20}\n", "endpoints: {a: {attempt_timeout: 3d}}\n"} {
		t.Run(text, func(t *testing.T) {
			if _, err := ParseProxyConfig([]byte(text)); err == nil {
				t.Errorf("no error for %q", text)
			}
		})
	}
}
