package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// certificateWarningBefore is how long before its expiry a configured
// caller certificate is warned about at start.
const certificateWarningBefore = 30 * 24 * time.Hour

// watchCertificates checks the certificates of auth.certificate_files at
// start: one that has expired or is not valid yet is a loud
// warning naming its file and dates, one expiring within 30 days a warning.
// The proxy still verifies signatures with them — a JWS verifier trusts
// configured keys, not certificate chains — but Salesforce stops signing
// with an expired certificate, so the warning is the operator's cue to
// rotate. It registers on reg:
//   - callout_auth_certificate_not_after_timestamp_seconds{source} and
//     callout_auth_certificate_not_before_timestamp_seconds{source}, the
//     validity period of each certificate (Unix seconds), for alerts such
//     as `… - time() < 7*86400`;
//   - callout_auth_certificates_invalid, the number of configured
//     certificates outside their validity period, evaluated at each scrape
//     with now.
//
// Bare PUBLIC KEY blocks have no validity period and are not counted.
func watchCertificates(keys []auth.KeyInfo, now func() time.Time, logger *slog.Logger, reg prometheus.Registerer) error {
	notAfter := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "callout_auth_certificate_not_after_timestamp_seconds",
		Help: "End of the validity period of each certificate in auth.certificate_files (Unix seconds).",
	}, []string{"source"})
	notBefore := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "callout_auth_certificate_not_before_timestamp_seconds",
		Help: "Start of the validity period of each certificate in auth.certificate_files (Unix seconds).",
	}, []string{"source"})
	var certs []auth.KeyInfo
	for _, k := range keys {
		if k.NotAfter.IsZero() {
			continue
		}
		certs = append(certs, k)
		notAfter.WithLabelValues(k.Source).Set(float64(k.NotAfter.Unix()))
		notBefore.WithLabelValues(k.Source).Set(float64(k.NotBefore.Unix()))
	}
	invalid := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "callout_auth_certificates_invalid",
		Help: "Certificates in auth.certificate_files that are expired or not valid yet.",
	}, func() float64 {
		n, t := 0, now()
		for _, k := range certs {
			if !k.ValidAt(t) {
				n++
			}
		}
		return float64(n)
	})
	for _, c := range []prometheus.Collector{notAfter, notBefore, invalid} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	t := now()
	for _, k := range certs {
		attrs := []any{slog.String("source", k.Source), slog.Time("not_before", k.NotBefore),
			slog.Time("not_after", k.NotAfter)}
		switch {
		case t.After(k.NotAfter):
			logger.Warn("AUTH CERTIFICATE EXPIRED: a certificate in auth.certificate_files is past its "+
				"validity period; Salesforce no longer signs with it. Rotate it (upload the new certificate, "+
				"add it to auth.certificate_files, then remove this one).", attrs...)
		case t.Before(k.NotBefore):
			logger.Warn("AUTH CERTIFICATE NOT YET VALID: a certificate in auth.certificate_files starts "+
				"its validity period in the future; check the file and the clock.", attrs...)
		case k.NotAfter.Sub(t) < certificateWarningBefore:
			logger.Warn("auth certificate expires within 30 days; rotate it", attrs...)
		}
	}
	return nil
}
