package backend

import (
	"errors"
	"fmt"
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
