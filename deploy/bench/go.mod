module github.com/calloutproxy/callout-proxy/deploy/bench

go 1.26.8

require (
	github.com/calloutproxy/callout-proxy v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/tsenart/vegeta/v12 v12.13.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/rs/dnscache v0.0.0-20230804202142-fc85eb664529 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/calloutproxy/callout-proxy => ../..
