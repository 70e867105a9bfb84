package sfapi

import (
	"strconv"
	"strings"
)

// Usage is one entry of the Sforce-Limit-Info header: calls used and the
// allocation they count against.
type Usage struct {
	// Used is the number of calls made in the window (24 hours, rolling).
	Used int64
	// Limit is the allocation; always > 0 in a parsed entry.
	Limit int64
}

// Ratio is Used/Limit; 0 for the zero Usage.
func (u Usage) Ratio() float64 {
	if u.Limit <= 0 {
		return 0
	}
	return float64(u.Used) / float64(u.Limit)
}

// AppUsage is a per-app-api-usage entry: the connected app's own quota.
type AppUsage struct {
	Usage
	// App is the connected app's name, from "(appName=…)".
	App string
}

// LimitInfo is a parsed Sforce-Limit-Info response header ("Limit Info
// Header", REST API Developer Guide). Its documented forms are entries
// separated by ";":
//
//	api-usage=10018/100000
//	api-usage=110018/100000; api-bursts=1/750
//	api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)
//
// Entries whose value is not used/limit are skipped.
type LimitInfo struct {
	// APIUsage is the org's daily API usage (api-usage); zero when absent.
	APIUsage Usage
	// APIBursts is api-bursts: how often the org ran past its daily
	// allocation this month, of its monthly entitlement; zero when absent.
	APIBursts Usage
	// PerApp lists the per-app-api-usage entries (connected app quotas).
	PerApp []AppUsage
}

// ParseLimitInfoHeader parses a Sforce-Limit-Info value in any of its
// documented forms (see LimitInfo). It also accepts "," between entries,
// as older examples wrote them. ok is false when no entry parsed.
func ParseLimitInfoHeader(v string) (info LimitInfo, ok bool) {
	for part := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ';' || r == ',' }) {
		name, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			continue
		}
		app := ""
		if i := strings.IndexByte(val, '('); i >= 0 && strings.HasSuffix(val, ")") {
			attr := val[i+1 : len(val)-1]
			val = val[:i]
			if a, isApp := strings.CutPrefix(attr, "appName="); isApp {
				app = a
			}
		}
		u, good := parseUsage(val)
		if !good {
			continue
		}
		switch strings.TrimSpace(name) {
		case "api-usage":
			info.APIUsage, ok = u, true
		case "api-bursts":
			info.APIBursts, ok = u, true
		case "per-app-api-usage":
			info.PerApp, ok = append(info.PerApp, AppUsage{Usage: u, App: app}), true
		}
	}
	return info, ok
}

// parseUsage reads "used/limit" with used >= 0 and limit > 0.
func parseUsage(s string) (Usage, bool) {
	a, b, cut := strings.Cut(strings.TrimSpace(s), "/")
	x, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	y, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if !cut || err1 != nil || err2 != nil || x < 0 || y <= 0 {
		return Usage{}, false
	}
	return Usage{Used: x, Limit: y}, true
}
