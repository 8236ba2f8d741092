package config

import (
	"os"
	"strings"
	"unicode"
)

// expander replaces ${VAR} and ${VAR:-default} in string values, the syntax
// Claude Code accepts in .mcp.json. A bare "$" or "$VAR" is left alone.
// ${TOOLGATE_CONFIG_DIR} is always the config file's directory.
type expander struct {
	p       *parser
	server  string
	lookup  func(string) (string, bool)
	lenient bool // keep unset references instead of reporting them (disabled servers)
	// unset, when set, collects the references to unset variables (each
	// expanded to "") instead of reporting them (enabled servers: see
	// Server.Unset).
	unset *[]UnsetVar
}

func (x *expander) get(name string) (string, bool) {
	if name == DirVar {
		if x.p.dir != "" {
			return x.p.dir, true
		}
		wd, err := os.Getwd()
		return wd, err == nil
	}
	return x.lookup(name)
}

func (x *expander) expand(field, s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		ref := rest[i:]
		end := strings.IndexByte(ref, '}')
		if end < 0 {
			x.p.errorf(x.server, field, `has "${" without a closing "}": write ${NAME} or ${NAME:-default}`)
			b.WriteString(ref)
			return b.String()
		}
		body := ref[2:end]
		rest = ref[end+1:]
		name, def, hasDef := strings.Cut(body, ":-")
		if !validVarName(name) {
			switch kind, v, _ := strings.Cut(name, ":"); {
			case kind == "env" && validVarName(v):
				// Cursor's and VS Code's form, in a file copied by hand.
				x.p.errorf(x.server, field, "${%s} is Cursor's and VS Code's form: write ${%s} (toolgate import rewrites it)", body, v)
			case kind == "input" && v != "":
				x.p.errorf(x.server, field, "${%s} is a VS Code prompt, and toolgate asks no one: write a variable, ${%s}, and set it in toolgate's environment (toolgate import does so)", body, InputVar(v))
			default:
				x.p.errorf(x.server, field, "${%s} is not a variable reference: write ${NAME} or ${NAME:-default} (NAME: letters, digits, _)", body)
			}
			b.WriteString(ref[:end+1])
			continue
		}
		v, ok := x.get(name)
		if x.p.raw && name != DirVar {
			b.WriteString(ref[:end+1]) // as written, default included
			continue
		}
		switch {
		case ok && (v != "" || !hasDef):
			b.WriteString(v)
		case hasDef: // shell semantics: the default also replaces an empty value
			b.WriteString(def)
		case x.lenient:
			b.WriteString(ref[:end+1])
		case x.unset != nil:
			*x.unset = append(*x.unset, UnsetVar{Name: name, Field: field})
		default:
			x.p.errorf(x.server, field, "variable ${%s} is not set: set it in toolgate's environment or give a default, ${%s:-value}", name, name)
		}
	}
}

// expandMap expands the values of env or headers (never the keys).
func (x *expander) expandMap(field string, m map[string]string) map[string]string {
	for k, v := range m {
		m[k] = x.expand(field+mapKey(k), v)
	}
	return m
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// InputVar is the variable that stands for VS Code's input id ("${input:
// api-key}" → API_KEY): what toolgate import writes, and what a config
// with such a prompt is told to write.
func InputVar(id string) string {
	var b strings.Builder
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
			b.WriteRune(unicode.ToUpper(r))
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "INPUT"
	}
	return b.String()
}
