package config_test

import (
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// invalidCase is a configuration (the base one with sections replaced) and
// the exact problems it must produce, each as "key: message fragment". The
// key must be the problem's Key, and there must be no other problem.
type invalidCase struct {
	name string
	over map[string]string
	want []string
}

func runInvalid(t *testing.T, cases []invalidCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := keyFiles(t)
			cfg, err := config.Parse([]byte(doc(tt.over, dir)), baseEnv().get)
			if cfg != nil {
				t.Error("Parse returned a Config along with errors")
			}
			ps := problems(t, err)
			for _, w := range tt.want {
				key, frag, _ := strings.Cut(w, ": ")
				found := false
				for _, p := range ps {
					found = found || (p.Key == key && strings.Contains(p.Msg, frag))
				}
				if !found {
					t.Errorf("missing problem %q; got:\n%v", w, err)
				}
			}
			if len(ps) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
		})
	}
}

// endpoint replaces the endpoints section with payment-api having body
// (lines already indented by four spaces).
func endpoint(body string) map[string]string {
	return map[string]string{"endpoints": "endpoints:\n  payment-api:\n" + body}
}

// url is payment-api's url line, for endpoint bodies.
const url = "    url: https://api.example.com/v2\n"

func TestValidateEndpointNameAndURL(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"name with capitals", map[string]string{"endpoints": "endpoints:\n  Payment_API:\n" + url},
			[]string{"endpoints.Payment_API: name must match ^[a-z0-9][a-z0-9-]{0,62}$"}},
		{"name too long", map[string]string{"endpoints": "endpoints:\n  " + strings.Repeat("a", 64) + ":\n" + url},
			[]string{"endpoints." + strings.Repeat("a", 64) + ": name must match"}},
		{"name starting with a dash", map[string]string{"endpoints": "endpoints:\n  -api:\n" + url},
			[]string{"endpoints.-api: name must match"}},
		{"no endpoints", map[string]string{"endpoints": ""},
			[]string{"endpoints: at least one endpoint is required"}},
		{"empty endpoint", map[string]string{"endpoints": "endpoints:\n  payment-api:\n"},
			[]string{"endpoints.payment-api: must be a mapping with at least url"}},
		{"url missing", endpoint("    owner: 005000000000001AAA\n"),
			[]string{"endpoints.payment-api.url: required"}},
		{"url scheme", endpoint("    url: ftp://api.example.com/\n"),
			[]string{"endpoints.payment-api.url: scheme must be http or https"}},
		{"url relative", endpoint("    url: /v2/charges\n"),
			[]string{"endpoints.payment-api.url: scheme must be http or https"}},
		{"url without host", endpoint("    url: https:///v2\n"),
			[]string{"endpoints.payment-api.url: must be an absolute URL with a host"}},
		{"url with user info", endpoint("    url: https://user:" + urlPassword + "@api.example.com/\n"),
			[]string{"endpoints.payment-api.url: must not contain user info"}},
		{"url with query", endpoint("    url: https://api.example.com/v2?key=1\n"),
			[]string{"endpoints.payment-api.url: must not have a query"}},
		{"url with empty query", endpoint("    url: https://api.example.com/v2?\n"),
			[]string{"endpoints.payment-api.url: must not have a query"}},
		{"url with fragment", endpoint("    url: https://api.example.com/v2#top\n"),
			[]string{"endpoints.payment-api.url: must not have a fragment"}},
		{"url port 0", endpoint("    url: https://api.example.com:0/v2\n"),
			[]string{"endpoints.payment-api.url: port must be 1-65535"}},
	})
}

func TestValidateEndpointSettings(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"owner not a user id", endpoint(url + "    owner: 001000000000001AAA\n"),
			[]string{"endpoints.payment-api.owner: must be a Salesforce user id"}},
		{"idempotency", endpoint(url + "    idempotency: maybe\n"),
			[]string{`endpoints.payment-api.idempotency: "maybe" must be honoured or ignored`}},
		{"completion events", endpoint(url + "    completion_events: some\n"),
			[]string{`endpoints.payment-api.completion_events: "some" must be all, dead_letters or none`}},
		{"network not a CIDR", endpoint(url + "    allowed_networks: [10.0.0.0/8, 10.0.0.0/33, 10.1.2.3]\n"),
			[]string{`endpoints.payment-api.allowed_networks[1]: "10.0.0.0/33" is not a CIDR`,
				`endpoints.payment-api.allowed_networks[2]: "10.1.2.3" is not a CIDR`}},
		{"network with host bits", endpoint(url + "    allowed_networks: [10.0.0.1/8]\n"),
			[]string{`endpoints.payment-api.allowed_networks[0]: "10.0.0.1/8" has host bits set; the network is 10.0.0.0/8`}},
		{"issuer not configured", endpoint(url + "    allowed_issuers: [https://example.my.salesforce.com, https://other.my.salesforce.com]\n"),
			[]string{`endpoints.payment-api.allowed_issuers[1]: "https://other.my.salesforce.com" is not one of auth.issuers`}},
		{"negative overrides", endpoint(url + "    attempt_timeout: -1s\n    breaker_failures: -2\n    max_concurrency: -1\n"),
			[]string{"endpoints.payment-api.attempt_timeout: must not be negative; leave it out to inherit policy.attempt_timeout",
				"endpoints.payment-api.breaker_failures: must not be negative",
				"endpoints.payment-api.max_concurrency: must not be negative"}},
		{"shards past the bound", endpoint(url + "    shards: 65\n"),
			[]string{"endpoints.payment-api.shards: must be 1 to 64 (0 or absent: 1)"}},
		{"negative shards", endpoint(url + "    shards: -1\n"),
			[]string{"endpoints.payment-api.shards: must be 1 to 64 (0 or absent: 1)"}},
		{"connect over attempt", endpoint(url + "    connect_timeout: 20s\n"),
			[]string{"endpoints.payment-api.connect_timeout: 20s exceeds the attempt_timeout in force (15s)"}},
		{"attempt under an explicit header limit", endpoint(url + "    attempt_timeout: 8s\n    header_timeout: 10s\n"),
			[]string{"endpoints.payment-api.header_timeout: 10s exceeds the attempt_timeout in force (8s)"}},
	})
}

func TestValidateEndpointHeaders(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"header name not a token", endpoint(url + "    headers:\n      Bad Header: {env: PAYMENT_AUTH}\n"),
			[]string{"endpoints.payment-api.headers.Bad Header: is not a valid header name"}},
		{"hop-by-hop header", endpoint(url + "    headers:\n      connection: {env: PAYMENT_AUTH}\n      Transfer-Encoding: {env: PAYMENT_AUTH}\n"),
			[]string{"endpoints.payment-api.headers.connection: is a hop-by-hop header",
				"endpoints.payment-api.headers.Transfer-Encoding: is a hop-by-hop header"}},
		{"proxy-owned header", endpoint(url + "    headers:\n      Idempotency-Key: {env: PAYMENT_AUTH}\n      Host: {env: PAYMENT_AUTH}\n"),
			[]string{"endpoints.payment-api.headers.Idempotency-Key: is set by the proxy",
				"endpoints.payment-api.headers.Host: is set by the proxy"}},
		{"header both env and file", endpoint(url + "    headers:\n      X-Key: {env: PAYMENT_AUTH, file: {{dir}}/secret.txt}\n"),
			[]string{"endpoints.payment-api.headers.X-Key: set exactly one of env and file"}},
		{"header neither env nor file", endpoint(url + "    headers:\n      X-Key: {}\n"),
			[]string{"endpoints.payment-api.headers.X-Key: set exactly one of env and file"}},
		{"header repeated in another case", endpoint(url + "    headers:\n      X-Key: {env: PAYMENT_AUTH}\n      x-key: {env: PAYMENT_AUTH}\n"),
			[]string{"endpoints.payment-api.headers.x-key: repeats header X-Key"}},
		{"redact", endpoint(url + "    redact: {headers: [X-Ok, 'Bad:Name'], query: [''], json_fields: [card..number, card.number]}\n"),
			[]string{"endpoints.payment-api.redact.headers[1]: is not a valid header name",
				"endpoints.payment-api.redact.query[0]: must not be empty",
				`endpoints.payment-api.redact.json_fields[0]: "card..number" is not a dot-separated path`}},
	})
}

func TestValidatePolicy(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"zero base delay", map[string]string{"policy": "policy:\n  base_delay: 0s\n"},
			[]string{"policy.base_delay: must be a positive duration"}},
		{"no attempts", map[string]string{"policy": "policy:\n  max_attempts: 0\n"},
			[]string{"policy.max_attempts: must be at least 1"}},
		{"multiplier below 1", map[string]string{"policy": "policy:\n  multiplier: 0.5\n"},
			[]string{"policy.multiplier: must be at least 1"}},
		{"base over max delay", map[string]string{"policy": "policy:\n  base_delay: 7h\n"},
			[]string{"policy.base_delay: must not exceed policy.max_delay"}},
		{"connect over attempt", map[string]string{"policy": "policy:\n  connect_timeout: 16s\n"},
			[]string{"policy.connect_timeout: 16s exceeds the attempt_timeout in force (15s)"}},
		{"zero sizes", map[string]string{"policy": "policy:\n  max_request_bytes: 0\n  max_response_bytes: -1\n"},
			[]string{"policy.max_request_bytes: must be at least 1 byte", "policy.max_response_bytes: must be at least 1 byte"}},
	})
}

func TestValidateListenersAndTLS(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"listen not host:port", map[string]string{"listen": "listen: localhost\n"},
			[]string{`listen: "localhost" is not a host:port`}},
		{"listen port out of range", map[string]string{"listen": "listen: 127.0.0.1:70000\n"},
			[]string{`listen: "127.0.0.1:70000" is not a host:port`}},
		{"listen empty", map[string]string{"listen": "listen: ''\n"},
			[]string{"listen: required"}},
		{"admin on the callout listener", map[string]string{"listen": "listen: 127.0.0.1:9999\nadmin_listen: 127.0.0.1:9999\n"},
			[]string{"admin_listen: must differ from listen"}},
		{"tls cert without key", map[string]string{"extra": "tls_cert_file: {{dir}}/cert.pem\n"},
			[]string{"tls_key_file: required when tls_cert_file is set"}},
		{"tls key without cert", map[string]string{"extra": "tls_key_file: {{dir}}/key.pem\n"},
			[]string{"tls_cert_file: required when tls_key_file is set"}},
	})
}

func TestValidateRedis(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"url and cluster", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/0\n  cluster: [10.0.0.1:6379]\n"},
			[]string{"redis: set one of url, cluster and sentinel, not several"}},
		{"url scheme", map[string]string{"redis": "redis:\n  url: http://:" + urlPassword + "@127.0.0.1:6379\n"},
			[]string{`redis.url: scheme must be redis or rediss, not "http"`}},
		{"url without host", map[string]string{"redis": "redis:\n  url: redis:///0\n"},
			[]string{"redis.url: has no host"}},
		{"url database", map[string]string{"redis": "redis:\n  url: redis://127.0.0.1:6379/zero\n"},
			[]string{"redis.url: path must be a database number"}},
		{"password twice", map[string]string{"redis": "redis:\n  url: redis://:" + urlPassword + "@127.0.0.1:6379/0\n  password_env: REDIS_PASSWORD\n"},
			[]string{"redis.password_env: set, but redis.url carries a password too"}},
		{"cluster seeds", map[string]string{"redis": "redis:\n  cluster: [10.0.0.1:6379, redis-1, ':6379', 'h:0']\n"},
			[]string{`redis.cluster[1]: "redis-1" is not host:port`, `redis.cluster[2]: ":6379" is not host:port`,
				`redis.cluster[3]: "h:0" is not host:port`}},
	})
}

func TestValidateSalesforce(t *testing.T) {
	const rest = "  client_id_env: SF_CLIENT_ID\n  username: integration@example.com\n  private_key_file: {{dir}}/key.pem\n"
	runInvalid(t, []invalidCase{
		{"login url http", map[string]string{"salesforce": "salesforce:\n  login_url: http://login.salesforce.com\n" + rest},
			[]string{"salesforce.login_url: must be an https URL"}},
		{"login url with path", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com/services\n" + rest},
			[]string{"salesforce.login_url: must be scheme and host only"}},
		{"empty block", map[string]string{"salesforce": "salesforce:\n  api_version: '68'\n"},
			[]string{"salesforce.login_url: required", "salesforce.client_id_env: required", "salesforce.username: required",
				"salesforce.private_key_file: required", `salesforce.api_version: "68" is not an API version such as "68.0"`}},
		{"username not an email", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n  client_id_env: SF_CLIENT_ID\n  username: integration\n  private_key_file: {{dir}}/key.pem\n"},
			[]string{"salesforce.username: must be a Salesforce username"}},
		{"outbox settings", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n" + rest +
			"  api_usage_slowdown: 1.5\n  limit_pause: -1m\n  poll_interval: -1s\n  reprocess_interval: -1m\n  webhook_url: ftp://hooks.example.com/x\n"},
			[]string{"salesforce.api_usage_slowdown: must be a share of the daily limit", "salesforce.limit_pause: must not be negative",
				"salesforce.poll_interval: must not be negative", "salesforce.reprocess_interval: must not be negative",
				"salesforce.webhook_url: must be an absolute http or https URL"}},
		{"webhook with user info", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n" + rest +
			"  webhook_url: https://u:p@hooks.example.com/x\n  api_usage_slowdown: -0.1\n"},
			[]string{"salesforce.webhook_url: must be an absolute http or https URL", "salesforce.api_usage_slowdown: must be a share"}},
		{"audience and batches", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n" + rest +
			"  audience: http://test.salesforce.com\n  batch_linger: 2m\n  batch_max_bytes: 1000\n"},
			[]string{"salesforce.audience: must be an https URL", "salesforce.batch_linger: must be at most 1m0s",
				"salesforce.batch_max_bytes: must be 65536 to 50000000 bytes"}},
		{"negative linger, huge batch", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n" + rest +
			"  audience: https://test.salesforce.com?x=1\n  batch_linger: -1s\n  batch_max_bytes: 60000000\n"},
			[]string{"salesforce.audience: must be an https URL", "salesforce.batch_linger: must not be negative",
				"salesforce.batch_max_bytes: must be 65536 to 50000000 bytes"}},
		{"pubsub endpoint", map[string]string{"salesforce": "salesforce:\n  login_url: https://login.salesforce.com\n" + rest +
			"  pubsub: api.pubsub.salesforce.com\n"},
			[]string{`salesforce.pubsub: must be host:port (default api.pubsub.salesforce.com:7443) or "off"`}},
	})
}
