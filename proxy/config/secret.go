package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// maxSecretFileBytes bounds a secret file, in bytes (64 KiB): enough for any
// token or key, and a guard against a path to a device or a log file.
const maxSecretFileBytes = 64 << 10

// envNameRE is the shape of an environment variable name (POSIX.1-2017
// §8.1, portable names). A value of another shape is likely a secret pasted
// where a variable name belongs, so it is refused without being echoed.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Resolve returns the secret's value. With Env, getenv(Env) must be
// non-empty; with File, the file is read (at most 64 KiB) and one trailing
// "\n" or "\r\n" is removed, and what is left must be non-empty. A nil
// getenv means os.Getenv.
//
// Errors name the variable or the file, never the value: not both or
// neither of Env and File set, an Env that is not a variable name, the
// variable unset or empty, the file unreadable, too large or empty.
func (s SecretRef) Resolve(getenv func(string) string) (string, error) {
	switch {
	case s.Env != "" && s.File != "":
		return "", errors.New("set one of env and file, not both")
	case s.Env != "":
		return resolveEnv(s.Env, getenv)
	case s.File != "":
		return readSecretFile(s.File)
	}
	return "", errors.New("set one of env and file")
}

func resolveEnv(name string, getenv func(string) string) (string, error) {
	if !envNameRE.MatchString(name) {
		return "", errors.New("the env value is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*); name the variable, never the secret itself")
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	v := getenv(name)
	if v == "" {
		return "", fmt.Errorf("environment variable %s is not set or is empty", name)
	}
	return v, nil
}

func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("secret file %s: read: %w", path, err)
	}
	if len(b) > maxSecretFileBytes {
		return "", fmt.Errorf("secret file %s is larger than %d bytes", path, maxSecretFileBytes)
	}
	v := string(b)
	if t, ok := strings.CutSuffix(v, "\r\n"); ok {
		v = t
	} else {
		v = strings.TrimSuffix(v, "\n")
	}
	if v == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return v, nil
}

// HS256Secret returns the HS256 key of issuer iss: the value of the
// HS256SecretEnv or HS256SecretFile of the first binding of iss that has
// one (Auth.Bindings; see SecretRef.Resolve). Errors name the variable or
// the file, never the value; it also fails when iss has no HS256 secret.
func (a Auth) HS256Secret(iss string, getenv func(string) string) ([]byte, error) {
	for _, k := range a.Bindings() {
		ref := k.HS256Ref()
		if k.Issuer != iss || (ref.Env == "" && ref.File == "") {
			continue
		}
		v, err := ref.Resolve(getenv)
		if err != nil {
			return nil, fmt.Errorf("%s HS256 secret: %w", k.path, err)
		}
		return []byte(v), nil
	}
	return nil, fmt.Errorf("auth: issuer %q has no HS256 secret", iss)
}

// Ref returns where the token's value is, as a SecretRef.
func (t AdminToken) Ref() SecretRef { return SecretRef{Env: t.TokenEnv, File: t.TokenFile} }

// Value returns the admin token's bearer value, from TokenEnv or TokenFile
// (see SecretRef.Resolve). Errors name the token, the variable or the file,
// never the value.
func (t AdminToken) Value(getenv func(string) string) (string, error) {
	v, err := t.Ref().Resolve(getenv)
	if err != nil {
		return "", fmt.Errorf("admin token %q: %w", t.Name, err)
	}
	return v, nil
}

// Password returns the Redis password from PasswordEnv, or "" and no error
// when PasswordEnv is not set (the URL may carry one). The error names the
// variable, never the value.
func (r Redis) Password(getenv func(string) string) (string, error) {
	if r.PasswordEnv == "" {
		return "", nil
	}
	v, err := resolveEnv(r.PasswordEnv, getenv)
	if err != nil {
		return "", fmt.Errorf("redis password: %w", err)
	}
	return v, nil
}

// ClientID returns the connected app's consumer key from ClientIDEnv. The
// error names the variable.
func (s Salesforce) ClientID(getenv func(string) string) (string, error) {
	v, err := resolveEnv(s.ClientIDEnv, getenv)
	if err != nil {
		return "", fmt.Errorf("salesforce client id: %w", err)
	}
	return v, nil
}
