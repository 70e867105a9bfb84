package forward

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// resolveHeaders resolves an endpoint's configured headers with
// config.SecretRef.Resolve (an environment variable, or a file with one
// trailing newline trimmed). It runs on every attempt, so a rotated secret
// file or a changed environment takes effect on the next attempt. Errors
// name the header and where its value should be, never the value; a value
// with a control character (other than tab) is refused, since it could not
// be sent as a field value (RFC 9110 §5.5).
func resolveHeaders(refs map[string]config.SecretRef, getenv func(string) string) (http.Header, error) {
	h := make(http.Header, len(refs))
	for name, ref := range refs {
		v, err := ref.Resolve(getenv)
		if err != nil {
			return nil, fmt.Errorf("injected header %s: %w", name, err)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return nil, fmt.Errorf("injected header %s: the value contains a control character", name)
		}
		h.Add(name, v)
	}
	return h, nil
}
