package backend

import (
	"errors"
	"fmt"
	"strings"
)

// Unavailable says why server's tools cannot run right now, or "" when a
// call would be dispatched (up, or idle-lazy: the call starts it). Search
// results and execute_tool use it to mark tools of a backend that is still
// connecting or down.
func (p *Pool) Unavailable(server string) string {
	r := p.roster.Load()
	b, ok := r.byName[server]
	if !ok {
		if r.removed[server] {
			return fmt.Sprintf("server %q was removed from the config", server)
		}
		return fmt.Sprintf("server %q is not configured any more", server)
	}
	b.mu.Lock()
	var le *loginError
	login := errors.As(b.err, &le)
	b.mu.Unlock()
	if login {
		return fmt.Sprintf("server %q %v", server, le.err)
	}
	st := b.status()
	switch st.State {
	case StateUp, StateIdle:
		return ""
	case StateConnecting:
		if st.LastErr != "" {
			return fmt.Sprintf("server %q is reconnecting after: %s", server, st.LastErr)
		}
		return fmt.Sprintf("server %q is still connecting", server)
	default:
		return fmt.Sprintf("server %q is down: %s", server, st.Err)
	}
}

// Describe says in a few words what server offers, for search_tools'
// description: its config entry's "description"; else what the server said
// of itself in its last handshake: serverInfo's description, its title
// (when it is more than the name), or the first sentence of its
// instructions. "" when nothing is known (not connected yet, and no
// description in the config).
func (p *Pool) Describe(server string) string {
	r := p.roster.Load()
	if d := strings.TrimSpace(r.cfgs[server].Description); d != "" {
		return d
	}
	b, ok := r.byName[server]
	if !ok {
		return ""
	}
	b.mu.Lock()
	info := b.info
	b.mu.Unlock()
	if info == nil {
		return ""
	}
	if si := info.ServerInfo; si != nil {
		if d := strings.TrimSpace(si.Description); d != "" {
			return d
		}
		if t := strings.TrimSpace(si.Title); t != "" && !strings.EqualFold(t, si.Name) && !strings.EqualFold(t, server) {
			return t
		}
	}
	return firstSentence(info.Instructions)
}

// firstSentence is the first sentence of the first paragraph of text that
// is not a Markdown heading, a rule or a list marker alone.
func firstSentence(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimLeft(line, "-*> ")
		if line == "" || strings.HasPrefix(line, "#") || strings.Trim(line, "-=*_") == "" {
			continue
		}
		for i := 0; i < len(line)-1; i++ {
			if (line[i] == '.' || line[i] == '!' || line[i] == '?') && line[i+1] == ' ' {
				return line[:i+1]
			}
		}
		return line
	}
	return ""
}
