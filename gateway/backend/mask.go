package backend

import (
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/mask"
)

// Secrets lists the configured secret values of servers: their env and
// header values and OAuth client secrets. Masks built from them (package
// mask) hide them in what toolgate writes down.
func Secrets(servers ...config.Server) []string {
	var vals []string
	for _, srv := range servers {
		for _, v := range srv.Env {
			vals = append(vals, v)
		}
		for _, v := range srv.Headers {
			vals = append(vals, v)
		}
		if srv.OAuth != nil {
			vals = append(vals, srv.OAuth.ClientSecret)
		}
	}
	return vals
}

// newMasker returns a function that hides the server's configured secrets
// and common credential patterns in a line of backend output.
func newMasker(srv config.Server) func(string) string {
	return mask.New(Secrets(srv)).String
}
