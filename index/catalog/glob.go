package catalog

import (
	"fmt"
	"path"
	"strings"
)

// Globs over namespaced IDs (server__tool) select tools in profiles'
// tools.allow/deny and API keys' scopes. They are path.Match patterns: "*"
// matches any run of characters, "?" one character, "[a-z]" a class, and
// "\" escapes. A glob matches the whole ID. Unlike path.Match, "*" and "?"
// match "/" too: a backend may name a tool "a/b", and a deny of
// "server__*" must cover it.

// MatchID reports whether the glob matches the namespaced tool ID. A
// malformed glob matches nothing (CheckGlob rejects those at load).
func MatchID(glob, id string) bool {
	if strings.Contains(id, "/") || strings.Contains(glob, "/") {
		// path.Match stops "*" at "/": hide the slashes from it.
		glob, id = strings.ReplaceAll(glob, "/", "\x00"), strings.ReplaceAll(id, "/", "\x00")
	}
	ok, err := path.Match(glob, id)
	return ok && err == nil
}

// CheckGlob says why glob cannot select tools, or "" when it can: it must
// be well formed and name a server part, since every ID starts with its
// server ("memory__delete_*", "*__read_*"; "delete_*" would match nothing).
// The server part is the glob's text before its first "__".
func CheckGlob(glob string) string {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Sprintf("%q is not a valid glob (%v): use * for any run of characters and ? for one, e.g. \"memory__delete_*\"", glob, err)
	}
	if !strings.Contains(glob, Sep) && !strings.HasPrefix(glob, "*") {
		return fmt.Sprintf("%q can never match: globs match server__tool names, so start with the server (e.g. \"memory__%s\") or \"*\"", glob, glob)
	}
	return ""
}

// GlobServer returns the server a glob names literally (the text before its
// first "__" when that has no wildcard), or "" when it may match several.
func GlobServer(glob string) string {
	server, _, ok := strings.Cut(glob, Sep)
	if !ok || strings.ContainsAny(server, `*?[\`) {
		return ""
	}
	return server
}
