package config

// CanNotify reports whether an owner notification about ep (contract §6: the
// first dead letter of an outage, a disable) reaches anyone: a salesforce
// section with the endpoint's owner set (a custom notification), or a
// salesforce.webhook_url. Without either the notification is only logged.
func (c *Config) CanNotify(ep *Endpoint) bool {
	if c == nil || c.Salesforce == nil {
		return false
	}
	return c.Salesforce.WebhookURL != "" || (ep != nil && ep.Owner != "")
}
