module github.com/calloutproxy/callout-proxy/proxy/internal/realclients

go 1.26.8

require github.com/stripe/stripe-go/v82 v82.5.1

require (
	github.com/calloutproxy/callout-proxy v0.0.0
	github.com/hashicorp/go-retryablehttp v0.7.8
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

// The proxy's test harness (proxy/proctest) comes from this checkout.
replace github.com/calloutproxy/callout-proxy => ../../..
