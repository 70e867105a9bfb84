package app

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// certificateWarningBefore is how long before its expiry a configured
// caller certificate is warned about at start.
const certificateWarningBefore = 30 * 24 * time.Hour

// certificateWatch keeps the metrics of the certificates of
// auth.certificate_files, for the configuration in force (watch sets them
// again at each reload):
//   - callout_auth_certificate_not_after_timestamp_seconds{source} and
//     callout_auth_certificate_not_before_timestamp_seconds{source}, the
//     validity period of each certificate (Unix seconds), for alerts such
//     as `… - time() < 7*86400`;
//   - callout_auth_certificates_invalid, the number of configured
//     certificates outside their validity period, evaluated at each scrape
//     with now.
//
// Bare PUBLIC KEY blocks have no validity period and are not counted.
type certificateWatch struct {
	now                 func() time.Time
	notAfter, notBefore *prometheus.GaugeVec
	certs               atomic.Pointer[[]auth.KeyInfo]
}

// newCertificateWatch registers the certificates' metrics on reg.
// Errors: reg's, for a name registered twice.
func newCertificateWatch(now func() time.Time, reg prometheus.Registerer) (*certificateWatch, error) {
	w := &certificateWatch{now: now,
		notAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "callout_auth_certificate_not_after_timestamp_seconds",
			Help: "End of the validity period of each certificate in auth.certificate_files (Unix seconds).",
		}, []string{"source"}),
		notBefore: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "callout_auth_certificate_not_before_timestamp_seconds",
			Help: "Start of the validity period of each certificate in auth.certificate_files (Unix seconds).",
		}, []string{"source"}),
	}
	w.certs.Store(&[]auth.KeyInfo{})
	invalid := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "callout_auth_certificates_invalid",
		Help: "Certificates in auth.certificate_files that are expired or not valid yet.",
	}, func() float64 {
		n, t := 0, w.now()
		for _, k := range *w.certs.Load() {
			if !k.ValidAt(t) {
				n++
			}
		}
		return float64(n)
	})
	for _, c := range []prometheus.Collector{w.notAfter, w.notBefore, invalid} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// watch puts keys' certificates in the metrics, replacing the previous
// configuration's, and checks them now: one that has expired or is not
// valid yet is a loud warning naming its file and dates, one expiring
// within 30 days a warning. The proxy still verifies signatures with them
// — a JWS verifier trusts configured keys, not certificate chains — but
// Salesforce stops signing with an expired certificate, so the warning is
// the operator's cue to rotate.
func (w *certificateWatch) watch(keys []auth.KeyInfo, logger *slog.Logger) {
	var certs []auth.KeyInfo
	w.notAfter.Reset()
	w.notBefore.Reset()
	for _, k := range keys {
		if k.NotAfter.IsZero() {
			continue
		}
		certs = append(certs, k)
		w.notAfter.WithLabelValues(k.Source).Set(float64(k.NotAfter.Unix()))
		w.notBefore.WithLabelValues(k.Source).Set(float64(k.NotBefore.Unix()))
	}
	w.certs.Store(&certs)
	t := w.now()
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
}
