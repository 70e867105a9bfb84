module github.com/calloutproxy/callout-proxy/proxy/internal/realclients

go 1.26.0

require github.com/stripe/stripe-go/v82 v82.5.1
