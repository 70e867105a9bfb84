package credentials

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// WebhookIDPrefix begins every webhook-id the proxy sends: the callout's
// id follows, so the id is stable across a callout's attempts and a
// replay, which is a new callout, gets a new one (Standard Webhooks
// specification v1.0.0, "Webhook metadata": the id "remains the same no
// matter how many times a webhook that has failed is retried").
const WebhookIDPrefix = "msg_"

// WebhookID is the webhook-id of the callout calloutID: "msg_" + its id.
// Callout ids are URL-safe base64 (no '.', which the signed content
// "id.timestamp.body" must not see in the id).
func WebhookID(calloutID string) string { return WebhookIDPrefix + calloutID }

// webhookKey is one standard_webhooks secret: an environment variable,
// resolved and parsed on every use, or a watched file, parsed when it
// changes (a bad new file keeps the previous key).
type webhookKey struct {
	env  *secret                     // nil for a file
	file *watched[config.WebhookKey] // nil for an environment variable
}

func newWebhookKey(key string, ref config.SecretRef, o *Options) *webhookKey {
	if ref.File != "" && ref.Env == "" {
		parse := parseSecret(ref.File)
		return &webhookKey{file: newWatched(o, key, []string{ref.File}, maxSecretBytes,
			func(data [][]byte) (config.WebhookKey, error) {
				v, err := parse(data)
				if err != nil {
					return config.WebhookKey{}, err
				}
				return config.ParseWebhookKey(v)
			})}
	}
	return &webhookKey{env: newSecret(key, ref, o)}
}

// get returns the key as it is now. Errors are *ConfigError naming the key
// and the variable or file, never the value.
func (k *webhookKey) get() (config.WebhookKey, error) {
	if k.file != nil {
		v, _, err := k.file.get()
		if err != nil {
			return config.WebhookKey{}, &ConfigError{Err: err}
		}
		return v, nil
	}
	v, err := k.env.value()
	if err != nil {
		return config.WebhookKey{}, err
	}
	wk, err := config.ParseWebhookKey(v)
	if err != nil {
		return config.WebhookKey{}, &ConfigError{Err: fmt.Errorf("%s: %s: %w", k.env.key, k.env.ref, err)}
	}
	return wk, nil
}

// webhookSigner signs with every configured secret (Standard Webhooks
// specification v1.0.0, "Signature scheme" and "Webhook headers").
type webhookSigner struct {
	keys []*webhookKey
	now  func() time.Time
}

// sign sets webhook-id, webhook-timestamp (now, Unix seconds) and
// webhook-signature on h: for each secret, `v1,` + base64 HMAC-SHA256 or
// `v1a,` + base64 Ed25519 of "id.timestamp.body", space-separated, in the
// configured order. calloutID "" (a read without a record) gets a fresh
// random id. Values the caller sent under these names are replaced.
func (w *webhookSigner) sign(h http.Header, body []byte, calloutID string) error {
	id := WebhookIDPrefix + rand.Text()
	if calloutID != "" {
		id = WebhookID(calloutID)
	}
	ts := strconv.FormatInt(w.now().Unix(), 10)
	content := make([]byte, 0, len(id)+len(ts)+2+len(body))
	content = append(append(append(append(append(content, id...), '.'), ts...), '.'), body...)
	sigs := make([]string, 0, len(w.keys))
	for _, k := range w.keys {
		key, err := k.get()
		if err != nil {
			return err
		}
		var sig []byte
		switch key.Scheme {
		case config.WebhookEd25519:
			sig = ed25519.Sign(key.Ed25519, content)
		default:
			m := hmac.New(sha256.New, key.HMAC)
			m.Write(content)
			sig = m.Sum(nil)
		}
		sigs = append(sigs, key.Scheme+","+base64.StdEncoding.EncodeToString(sig))
	}
	h.Set("Webhook-Id", id)
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", strings.Join(sigs, " "))
	return nil
}
