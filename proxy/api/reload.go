package api

// ReloadDoc is the answer to POST /admin/v1/reload when the configuration
// was put in force (docs/configuration.md, "Reloading"): Status "reloaded"
// and Config, the fingerprint of the file now in force (the one /healthz
// reports).
type ReloadDoc struct {
	Status string `json:"status"`
	Config string `json:"config"`
}
