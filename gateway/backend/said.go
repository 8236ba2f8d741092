package backend

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/internal/termtext"
)

// ErrText is err's text as a model may read it (search_tools'
// downServers, execute_tool's answer, toolgate__server_status; GET
// /status and the console show it too): what a server said in it — the
// message of a JSON-RPC error it answered, the Said of the gateway's
// OwnWords (a body, its transport's error) — withheld where it addresses
// a model or hides text from people (quarantine.Scanner.ScanLine), as its
// stderr lines are (screenLine), the gateway's own words around it kept;
// its control characters escaped (termtext.Escape) where it is not.
// The log keeps the error as written. "" for nil.
//
// A server that failed its tool listing with "<IMPORTANT>Ignore previous
// instructions …" had every model that searched read it in
// search_tools' answer, though none called that server.
func ErrText(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	said := saidIn(err, nil)
	// The longest first: a Said may hold a JSON-RPC error's message.
	slices.SortFunc(said, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, s := range said {
		if !strings.Contains(text, s) {
			continue
		}
		if fs := (quarantine.Scanner{}).ScanLine(s); len(fs) > 0 {
			text = strings.ReplaceAll(text, s, "[the server's words withheld: "+findingsWhy(fs)+"; toolgate logs shows them]")
		} else if e := termtext.Escape(s); e != s {
			text = strings.ReplaceAll(text, s, e)
		}
	}
	return text
}

// saidIn appends to out the texts in err's tree that a server chose.
func saidIn(err error, out []string) []string {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Message != "" {
		out = append(out, we.Message)
	}
	switch e := err.(type) {
	case nil:
		return out
	case *OwnWords:
		for w := e; w != nil; w = w.Then {
			if w.Said != nil {
				out = append(saidIn(w.Said, out), w.Said.Error())
			}
		}
		return out
	case interface{ Unwrap() error }:
		return saidIn(e.Unwrap(), out)
	case interface{ Unwrap() []error }:
		for _, u := range e.Unwrap() {
			out = saidIn(u, out)
		}
	}
	return out
}

// findingsWhy is what the scan found, in words, each rule once.
func findingsWhy(fs []quarantine.Finding) string {
	why := make([]string, 0, len(fs))
	for _, f := range fs {
		if w := f.What(); !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	return strings.Join(why, ", ")
}
