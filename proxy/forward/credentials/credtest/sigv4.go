package credtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// VerifySigV4 checks an AWS Signature Version 4 as a receiving AWS service
// would: it rebuilds the request from what arrived (method, host, path and
// query, the headers its Authorization lists as signed, the received body's
// own SHA-256) and signs it again with the AWS SDK for Go v2's signer,
// the same credentials and the time of its X-Amz-Date; the two
// Authorization values must be equal, and X-Amz-Content-Sha256 must be the
// body's hash. r is the request as received (its body already read into
// body).
func VerifySigV4(r *http.Request, body []byte, creds aws.Credentials, service, region string) error {
	got := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(got, "SignedHeaders=")
	if !ok {
		return errors.New("no SigV4 Authorization")
	}
	signed, _, _ = strings.Cut(signed, ",")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != hash {
		return fmt.Errorf("X-Amz-Content-Sha256 %q is not the body's SHA-256 %q", h, hash)
	}
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.RequestURI, nil)
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(body))
	for _, name := range strings.Split(signed, ";") {
		switch name {
		case "host", "content-length", "x-amz-date", "x-amz-security-token":
			continue // the signer sets these from the request and the credentials
		}
		req.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = service == "s3" })
	if err := signer.SignHTTP(context.Background(), creds, req, hash, service, region, at); err != nil {
		return err
	}
	if want := req.Header.Get("Authorization"); want != got {
		return fmt.Errorf("signature mismatch:\n got  %s\n want %s", got, want)
	}
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != creds.SessionToken {
		return errors.New("X-Amz-Security-Token is not the session token")
	}
	return nil
}
