package forward

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"

	"code.dny.dev/ssrf"
)

// ErrBlockedAddress marks a dial the SSRF guard refused: the endpoint's host
// resolved to an address outside the public internet and the endpoint's
// allowed_networks, to a cloud metadata address, or the port was not the
// endpoint's own (contract §2 "blocked address", rejected, never retried).
// Attempt.Err is then a *problem.Error of code problem.BlockedAddress (403)
// that wraps an error matching ErrBlockedAddress with errors.Is.
var ErrBlockedAddress = errors.New("upstream address blocked by the SSRF guard")

// metadataPrefixes are cloud instance-metadata and platform addresses that
// are refused even when an endpoint's allowed_networks contains them: they
// hand out credentials to whoever asks from inside the instance.
var metadataPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.169.254/32"), // AWS, GCP, Azure, OCI, OpenStack, DigitalOcean
	netip.MustParsePrefix("169.254.170.2/32"),   // AWS ECS task metadata and credentials
	netip.MustParsePrefix("169.254.170.23/32"),  // AWS EKS Pod Identity agent
	netip.MustParsePrefix("169.254.0.23/32"),    // Tencent Cloud
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud (legacy)
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS IMDS over IPv6
	netip.MustParsePrefix("fd00:ec2::23/128"),   // AWS EKS Pod Identity over IPv6
	netip.MustParsePrefix("fd20:ce::254/128"),   // GCP metadata over IPv6
}

// nat64 is the well-known NAT64 prefix (RFC 6052 §2.1); an address in it
// embeds an IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockedError is the SSRF guard's refusal of one dial. It matches
// ErrBlockedAddress and unwraps to the ssrf package's reason.
type blockedError struct {
	addr   string // the ip:port dialled
	reason error
}

func (e *blockedError) Error() string {
	return "dial " + e.addr + " blocked: " + e.reason.Error()
}

func (e *blockedError) Unwrap() error { return e.reason }

func (e *blockedError) Is(target error) bool { return target == ErrBlockedAddress }

// errMetadata is the reason given for a cloud metadata address.
var errMetadata = errors.New("cloud metadata address, never allowed")

// guard decides, for one endpoint, which addresses a dial may reach.
type guard struct {
	ssrf *ssrf.Guardian
}

// newGuard builds the guard for an endpoint whose base URL is base and whose
// allowed_networks are networks: tcp4/tcp6 only, the endpoint's own port only
// (80 or 443 by scheme when the URL names none), public addresses plus
// networks, metadata addresses never.
func newGuard(base *url.URL, networks []netip.Prefix) (*guard, error) {
	port, err := endpointPort(base)
	if err != nil {
		return nil, err
	}
	var v4, v6 []netip.Prefix
	for _, p := range networks {
		a := p.Addr()
		switch {
		case a.Is4():
			v4 = append(v4, p)
		case a.Is4In6() && p.Bits() >= 96: // ::ffff:10.0.0.0/104 is 10.0.0.0/8 too
			v4 = append(v4, netip.PrefixFrom(a.Unmap(), p.Bits()-96))
			v6 = append(v6, p)
		default:
			v6 = append(v6, p)
		}
	}
	return &guard{ssrf: ssrf.New(
		ssrf.WithPorts(port),
		ssrf.WithAllowedV4Prefixes(v4...),
		ssrf.WithAllowedV6Prefixes(v6...),
	)}, nil
}

// control is the net.Dialer.Control function: it runs after DNS resolution,
// once per address tried, before any packet is sent, so a host name that
// resolves to a forbidden address is caught too. Its error is a
// *blockedError.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	if ap, err := netip.ParseAddrPort(address); err == nil && isMetadata(ap.Addr()) {
		return &blockedError{addr: address, reason: errMetadata}
	}
	if err := g.ssrf.Safe(network, address, nil); err != nil {
		return &blockedError{addr: address, reason: err}
	}
	return nil
}

// isMetadata reports whether a is a cloud metadata address, also in its
// IPv4-mapped and NAT64 forms.
func isMetadata(a netip.Addr) bool {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	for _, p := range metadataPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// endpointPort returns the TCP port of base: its explicit port, else 80 for
// http and 443 for https.
func endpointPort(base *url.URL) (uint16, error) {
	if p := base.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("endpoint URL port %q is not a TCP port", p)
		}
		return uint16(n), nil
	}
	switch base.Scheme {
	case "http":
		return 80, nil
	case "https":
		return 443, nil
	}
	return 0, fmt.Errorf("endpoint URL scheme %q is neither http nor https", base.Scheme)
}
