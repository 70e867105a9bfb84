package config

import (
	"regexp"
)

// awsNameRE is the shape of an AWS region or signing service name
// (eu-west-1, execute-api, s3).
var awsNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// validateSigning checks an endpoint's standard_webhooks and aws_sigv4
// blocks (no I/O; checkSigningResources reads the secrets): every secret
// named once, the AWS names, and no configured header or other credential
// that would set a header the signature sets.
func validateSigning(col *collector, key string, e *Endpoint) {
	if w := e.StandardWebhooks; w != nil {
		k := key + ".standard_webhooks.secrets"
		switch {
		case len(w.Secrets) == 0:
			col.add(k, "required: at least one {env: VAR} or {file: PATH} holding a whsec_ or whsk_ secret")
		case len(w.Secrets) > MaxWebhookSecrets:
			col.add(k, "at most %d secrets (a rotation needs two)", MaxWebhookSecrets)
		}
		for i, ref := range w.Secrets {
			if (ref.Env == "") == (ref.File == "") {
				col.add(index(k, i), "set exactly one of env and file")
			}
		}
	}
	if a := e.AWSSigV4; a != nil {
		k := key + ".aws_sigv4"
		for _, f := range []struct{ name, v, eg string }{{"region", a.Region, "eu-west-1"}, {"service", a.Service, "execute-api"}} {
			switch {
			case f.v == "":
				col.add(k+"."+f.name, "required, e.g. %s", f.eg)
			case !awsNameRE.MatchString(f.v):
				col.add(k+"."+f.name, "%q is not an AWS %s name (lower-case letters, digits and '-'), e.g. %s", f.v, f.name, f.eg)
			}
		}
		refs := []struct {
			name string
			ref  SecretRef
		}{{"access_key_id", a.AccessKeyID}, {"secret_access_key", a.SecretAccessKey}, {"session_token", a.SessionToken}}
		for _, r := range refs {
			if r.ref.Env != "" && r.ref.File != "" {
				col.add(k+"."+r.name, "set one of env and file, not both")
			}
		}
		switch {
		case a.AccessKeyID.set() != a.SecretAccessKey.set():
			col.add(k, "set access_key_id and secret_access_key together, or neither (the standard AWS credential chain)")
		case a.SessionToken.set() && !a.AccessKeyID.set():
			col.add(k+".session_token", "needs access_key_id and secret_access_key")
		}
		if e.OAuth2 != nil {
			col.add(k, "conflicts with oauth2: both send Authorization")
		}
	}
	for _, h := range e.SigningHeaders() {
		if _, ok := e.Headers[h]; ok {
			col.add(join(key+".headers", h), "conflicts with the endpoint's signature, which sets %s on every attempt", h)
		}
	}
}

// checkSigningResources resolves every signing secret of endpoint e (under
// key endpoints.<name>) so that a missing or malformed one is reported at
// start. Values are never quoted.
func checkSigningResources(col *collector, key string, e *Endpoint, getenv func(string) string) {
	if w := e.StandardWebhooks; w != nil {
		for i, ref := range w.Secrets {
			k := index(key+".standard_webhooks.secrets", i)
			if (ref.Env == "") == (ref.File == "") {
				continue
			}
			v, err := ref.Resolve(getenv)
			if err == nil {
				_, err = ParseWebhookKey(v)
			}
			if err != nil {
				col.add(k, "%s: %v", ref, err)
			}
		}
	}
	if a := e.AWSSigV4; a != nil {
		k := key + ".aws_sigv4"
		checkSecretValue(col, k+".access_key_id", a.AccessKeyID, getenv)
		checkSecretValue(col, k+".secret_access_key", a.SecretAccessKey, getenv)
		checkSecretValue(col, k+".session_token", a.SessionToken, getenv)
	}
}
