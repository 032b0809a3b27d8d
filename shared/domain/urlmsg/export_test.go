package urlmsg

import (
	"net/url"
	"strings"
)

// WebForm exposes webForm to the external tests.
var WebForm = webForm

// LegacyNormalize is Normalize as it was before webForm (frozen here):
// every URL it accepted without needing webForm must keep its normal form,
// and so its id and its place in a host's queue (FuzzNormalize checks it).
func LegacyNormalize(raw string) (string, error) {
	if len(raw) > MaxURLLength {
		return "", invalid("too long")
	}
	if hasControl(raw) || strings.ContainsAny(raw, " \t") {
		return "", invalid("spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalid("does not parse")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.User != nil {
		return "", invalid("scheme, opaque or user-info")
	}
	host, err := normalizeHostPort(u.Host, u.Scheme)
	if err != nil {
		return "", invalid("host")
	}
	u.Host = host
	u.Fragment = ""
	u.RawFragment = ""
	if u.Path == "" {
		u.Path = "/"
		u.RawPath = ""
	}
	if s := u.String(); len(s) > MaxURLLength {
		return "", invalid("too long")
	}
	return u.String(), nil
}
