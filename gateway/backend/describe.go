package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
)

// Unavailable says why server's tools cannot run right now, or "" when a
// call would be dispatched (up, or idle-lazy: the call starts it). Search
// results and execute_tool use it to mark tools of a backend that is still
// connecting or down. forKey says it to an API key that is not admin: the
// server's error reads as in its Status.ForKey (no command line, stderr
// lines or config path: a login's command names the config file).
func (p *Pool) Unavailable(server string, forKey bool) string {
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
	st := b.status()
	if forKey {
		st = st.ForKey()
	}
	if login {
		why := le.err.Error()
		if forKey {
			why = ErrForKey(le.err)
		}
		return fmt.Sprintf("server %q %s", server, why)
	}
	switch st.State {
	case StateUp, StateIdle:
		return ""
	case StateConnecting:
		// A call of a tool it listed waits for the connection (acquire):
		// said, or a model reading "still connecting" under a hit passed
		// over a tool that would run.
		if st.LastErr != "" {
			return fmt.Sprintf("server %q is reconnecting (%s) after: %s", server, CallWaits, st.LastErr)
		}
		return fmt.Sprintf("server %q is still connecting (%s)", server, CallWaits)
	default:
		return fmt.Sprintf("server %q is down: %s", server, st.Err)
	}
}

// Lists reports whether server's listing holds tool, once the server is
// not connecting: a connection being made (the first of a warm start, a
// restart's, a reconnect's) is waited for as a call of its tools waits
// (acquire), until it is up or down, or ctx ends. False for a server
// that is not configured, not up (down, idle, disabled), or when ctx ends
// first. execute_tool asks it of a name its catalog lacks: a tool the
// server added since the catalog was built.
func (p *Pool) Lists(ctx context.Context, server, tool string) bool {
	b, ok := p.roster.Load().byName[server]
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.run == nil && b.state == StateConnecting {
		if !b.awaitState(ctx) {
			return false
		}
	}
	return b.run != nil && slices.ContainsFunc(b.tools, func(t *mcp.Tool) bool { return t != nil && t.Name == tool })
}

// CallWaits is what Unavailable says of a call to a connecting server;
// search_tools marks such a reason as a note, not UNAVAILABLE.
const CallWaits = "a call of its tools waits for it"

// Describe says in a few words what server offers, for search_tools'
// description: its config entry's "description"; else what the server said
// of itself in its last handshake (selfDescription). "" when nothing is
// known (not connected yet, and no description in the config), or when
// what the server said is flagged.
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
	said := b.said
	b.mu.Unlock()
	return said
}

// saidBefore is what server said of itself in an earlier run
// (Options.Described), unless the scan of tool definitions flags it: the
// file that kept it is not the server's handshake.
func (p *Pool) saidBefore(server string) string {
	if p.opts.Described == nil {
		return ""
	}
	d := p.opts.Described(server)
	if len(quarantine.Scanner{}.Scan(catalog.Tool{Description: d})) > 0 {
		return ""
	}
	return d
}

// selfDescription is what a server said of itself in its handshake, for
// Describe: serverInfo's description, its title (when it is more than the
// name), or the first sentence of its instructions. search_tools'
// description, which every client's model reads, quotes it, so it goes
// through the scan of tool definitions (quarantine.Scanner): a text that
// is flagged is left out ("", with the findings to log), and the server is
// described by its tools' names instead.
func selfDescription(info *mcp.InitializeResult, server string) (string, []quarantine.Finding) {
	if info == nil {
		return "", nil
	}
	said, field := firstSentence(info.Instructions), "instructions"
	if si := info.ServerInfo; si != nil {
		if d := strings.TrimSpace(si.Description); d != "" {
			said, field = d, "serverInfo.description"
		} else if t := strings.TrimSpace(si.Title); t != "" && !strings.EqualFold(t, si.Name) && !strings.EqualFold(t, server) {
			said, field = t, "serverInfo.title"
		}
	}
	fs := quarantine.Scanner{}.Scan(catalog.Tool{Description: said})
	if len(fs) == 0 {
		return said, nil
	}
	for i := range fs {
		fs[i].Field = field
	}
	return "", fs
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
