// Package shellword writes commands for a user to paste into a shell.
package shellword

import "strings"

// Join joins words into a command line for a POSIX shell: a word that is
// empty or holds a space or a character the shell would act on is put in
// single quotes, inside which the shell expands nothing; a single quote in
// the word closes them, is written escaped, and opens them again.
func Join(words ...string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n\"'\\;&|<>()*?[#~$`!{}") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}
