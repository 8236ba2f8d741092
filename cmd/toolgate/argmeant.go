package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noArgsError is the refusal of words given to a command that takes none
// (cobra.NoArgs), with the flag the first word may have meant: `keys
// create k1` answered cobra's `unknown command "k1" for "toolgate keys
// create"`, as if k1 were a verb it lacked, with nothing about --name.
func noArgsError(cmd *cobra.Command, args []string) error {
	msg := fmt.Sprintf("%s takes no arguments", strings.TrimSuffix(verb(cmd), ": "))
	if flag := argMeant(cmd, args[0]); flag != "" {
		msg += fmt.Sprintf("; did you mean %s?", flag)
	} else {
		msg += fmt.Sprintf(" (got %q)", args[0])
	}
	return usageError{fmt.Errorf("%s (usage: %s)", msg, cmd.UseLine())}
}

// takesNoArgs reports whether check, a command's Args, refuses every
// argument and accepts none: cobra.NoArgs, said by what it does.
func takesNoArgs(cmd *cobra.Command, check cobra.PositionalArgs) bool {
	return check(cmd, nil) == nil && check(cmd, []string{"x"}) != nil
}

// argMeant is the flag with its value that word, given as an argument,
// most likely meant for cmd ("--name k1", "--config c.json", "--reset"),
// or "" when no flag of cmd fits it. Tried in order: a boolean flag of
// that name, an address, a count, a file, then a name.
func argMeant(cmd *cobra.Command, word string) string {
	has := func(name string) bool { return cmd.Flags().Lookup(name) != nil }
	with := func(name string) string { return "--" + name + " " + word }
	if f := cmd.Flags().Lookup(strings.TrimLeft(word, "-")); f != nil && f.Value.Type() == "bool" {
		return "--" + f.Name
	}
	if isAddress(word) {
		for _, name := range []string{"addr", "http"} {
			if has(name) {
				return with(name)
			}
		}
	}
	if _, err := strconv.Atoi(word); err == nil && has("lines") {
		return with("lines")
	}
	if strings.HasSuffix(word, ".jsonl") && has("tools") != has("queries") {
		return with(map[bool]string{true: "tools", false: "queries"}[has("tools")])
	}
	if _, err := os.Stat(word); err == nil || strings.HasSuffix(word, ".json") || strings.HasSuffix(word, ".jsonc") {
		if has("config") {
			return with("config")
		}
		return ""
	}
	for _, name := range []string{"name", "profile"} {
		if has(name) {
			return with(name)
		}
	}
	return ""
}

// isAddress reports whether word reads as host:port or an http(s) URL.
func isAddress(word string) bool {
	if u, err := url.Parse(word); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return true
	}
	_, port, err := net.SplitHostPort(word)
	_, perr := strconv.Atoi(port)
	return err == nil && perr == nil
}

// argNotFlag is ": NAME is an argument: toolgate keys revoke NAME" for an
// unknown flag of cmd that names what cmd takes as its argument (`keys
// revoke --name k1`, `servers remove --server fs`), the trap of noArgsError
// the other way round; "" otherwise. The argument's placeholder is the
// first word of cmd's usage line, when it is one in upper case.
func argNotFlag(cmd *cobra.Command, ne *pflag.NotExistError) string {
	typed := strings.ToLower(ne.GetSpecifiedName())
	if typed == "" {
		return ""
	}
	words := strings.Fields(strings.TrimPrefix(cmd.Use, cmd.Name()))
	if len(words) == 0 || words[0] != strings.ToUpper(words[0]) || strings.ToUpper(words[0]) == strings.ToLower(words[0]) {
		return "" // no argument placeholder first (NAME, SERVER, ID)
	}
	w := words[0]
	if typed == strings.ToLower(w) || typed == "name" || typed == "server" || typed == "id" {
		return fmt.Sprintf(": %s is an argument, not a flag: %s %s", w, cmd.CommandPath(), w)
	}
	return ""
}
