package config

import "testing"

func TestCanNotify(t *testing.T) {
	owned, orphan := &Endpoint{Name: "a", Owner: "005000000000001AAA"}, &Endpoint{Name: "b"}
	for _, tt := range []struct {
		name string
		cfg  *Config
		ep   *Endpoint
		want bool
	}{
		{"no salesforce", &Config{}, owned, false},
		{"owner", &Config{Salesforce: &Salesforce{}}, owned, true},
		{"no owner, no webhook", &Config{Salesforce: &Salesforce{}}, orphan, false},
		{"webhook", &Config{Salesforce: &Salesforce{WebhookURL: "https://hooks.example.com/x"}}, orphan, true},
	} {
		if got := tt.cfg.CanNotify(tt.ep); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
