package config

import (
	"maps"
	"slices"
)

// Changes lists, by their JSON names, the fields in which o differs from s
// ("name" for the name); nil when they describe the same server. A config
// reload uses it to decide which backends to restart: a server whose entry
// did not change keeps running untouched.
//
// Restart.Delays compare by value except that nil (follow the defaults) and
// an empty list (never restart) differ; nil and empty args, env and headers
// are the same.
func (s Server) Changes(o Server) []string {
	var out []string
	diff := func(field string, same bool) {
		if !same {
			out = append(out, field)
		}
	}
	diff("name", s.Name == o.Name)
	diff("type", s.Type == o.Type)
	diff("command", s.Command == o.Command)
	diff("args", slices.Equal(s.Args, o.Args))
	diff("env", maps.Equal(s.Env, o.Env))
	diff("cwd", s.Cwd == o.Cwd)
	diff("url", s.URL == o.URL)
	diff("headers", maps.Equal(s.Headers, o.Headers))
	diff("oauth", sameOAuth(s.OAuth, o.OAuth))
	diff("tls", sameTLS(s.TLS, o.TLS))
	diff("disabled", s.Disabled == o.Disabled)
	diff("connectTimeout", s.ConnectTimeout == o.ConnectTimeout)
	diff("callTimeout", s.CallTimeout == o.CallTimeout)
	diff("keepAlive", s.KeepAlive == o.KeepAlive)
	diff("maxResultBytes", s.MaxResultBytes == o.MaxResultBytes)
	diff("lazy", s.Lazy == o.Lazy)
	diff("idleTimeout", s.IdleTimeout == o.IdleTimeout)
	diff("restart", sameRestart(s.Restart, o.Restart))
	diff("description", s.Description == o.Description)
	diff("language", s.Language == o.Language)
	diff("unset", slices.Equal(s.Unset, o.Unset))
	return out
}

func sameRestart(a, b *Restart) bool {
	if a == nil || b == nil {
		return a == b
	}
	return (a.Delays == nil) == (b.Delays == nil) &&
		slices.Equal(a.Delays, b.Delays) &&
		a.StableAfter == b.StableAfter
}

func sameOAuth(a, b *OAuth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && slices.Equal(a.Scopes, b.Scopes)
}

func sameTLS(a, b *TLS) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
