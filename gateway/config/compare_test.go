package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServerChanges(t *testing.T) {
	base := Server{
		Name: "mem", Type: TypeStdio, Command: "node", Args: []string{"server.js", "--x"},
		Env: map[string]string{"K": "v"}, Cwd: "/srv", ConnectTimeout: sec(30), CallTimeout: sec(60),
		Restart: &Restart{Delays: []Duration{sec(1), sec(2)}, StableAfter: sec(60)},
	}
	with := func(f func(*Server)) Server {
		s := base
		s.Args = append([]string(nil), base.Args...)
		s.Env = map[string]string{"K": "v"}
		r := *base.Restart
		r.Delays = append([]Duration(nil), base.Restart.Delays...)
		s.Restart = &r
		f(&s)
		return s
	}
	tests := []struct {
		name string
		a, b Server
		want []string
	}{
		{"same", base, with(func(*Server) {}), nil},
		{"nil and empty args, env, headers are the same",
			Server{Name: "a"}, Server{Name: "a", Args: []string{}, Env: map[string]string{}, Headers: map[string]string{}}, nil},
		{"name", base, with(func(s *Server) { s.Name = "mem2" }), []string{"name"}},
		{"args order", base, with(func(s *Server) { s.Args = []string{"--x", "server.js"} }), []string{"args"}},
		{"env value", base, with(func(s *Server) { s.Env["K"] = "w" }), []string{"env"}},
		{"env key added", base, with(func(s *Server) { s.Env["L"] = "v" }), []string{"env"}},
		{"command and cwd", base, with(func(s *Server) { s.Command, s.Cwd = "deno", "/tmp" }), []string{"command", "cwd"}},
		{"to http", base, with(func(s *Server) { s.Type, s.URL, s.Command = TypeHTTP, "http://x/mcp", "" }), []string{"type", "command", "url"}},
		{"headers", Server{URL: "u", Headers: map[string]string{"A": "1"}}, Server{URL: "u", Headers: map[string]string{"A": "2"}}, []string{"headers"}},
		{"oauth added", Server{URL: "u"}, Server{URL: "u", OAuth: &OAuth{}}, []string{"oauth"}},
		{"oauth scopes", Server{URL: "u", OAuth: &OAuth{Scopes: []string{"a"}}}, Server{URL: "u", OAuth: &OAuth{Scopes: []string{"a", "b"}}}, []string{"oauth"}},
		{"oauth same", Server{URL: "u", OAuth: &OAuth{ClientID: "c"}}, Server{URL: "u", OAuth: &OAuth{ClientID: "c"}}, nil},
		{"timeouts", base, with(func(s *Server) { s.CallTimeout, s.ConnectTimeout = sec(5), sec(6) }), []string{"connectTimeout", "callTimeout"}},
		{"lazy and idle", base, with(func(s *Server) { s.Lazy, s.IdleTimeout = true, sec(10) }), []string{"lazy", "idleTimeout"}},
		{"disabled", base, with(func(s *Server) { s.Disabled = true }), []string{"disabled"}},
		{"restart delay", base, with(func(s *Server) { s.Restart.Delays[1] = sec(3) }), []string{"restart"}},
		{"restart stableAfter", base, with(func(s *Server) { s.Restart.StableAfter = sec(1) }), []string{"restart"}},
		{"restart dropped", base, with(func(s *Server) { s.Restart = nil }), []string{"restart"}},
		{"restart nil delays vs never restart",
			Server{Restart: &Restart{}}, Server{Restart: &Restart{Delays: []Duration{}}}, []string{"restart"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.a.Changes(tc.b)); diff != "" {
				t.Errorf("a.Changes(b) (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, tc.b.Changes(tc.a)); diff != "" {
				t.Errorf("b.Changes(a) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServerChangesCoversEveryField fails when a field is added to Server
// without teaching Changes about it (a reload would then miss that change).
func TestServerChangesCoversEveryField(t *testing.T) {
	typ := reflect.TypeFor[Server]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			var o Server
			v := reflect.ValueOf(&o).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString("x")
			case reflect.Bool:
				v.SetBool(true)
			case reflect.Int:
				v.SetInt(1)
			case reflect.Slice:
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			case reflect.Map:
				m := reflect.MakeMap(v.Type())
				m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v"))
				v.Set(m)
			case reflect.Pointer:
				v.Set(reflect.New(v.Type().Elem()))
			case reflect.Struct:
				if v.Type() != reflect.TypeFor[Duration]() {
					t.Fatalf("field %s of type %s: extend this test", f.Name, v.Type())
				}
				v.Set(reflect.ValueOf(Duration{time.Second}))
			default:
				t.Fatalf("field %s of kind %s: extend this test", f.Name, v.Kind())
			}
			if got := (Server{}).Changes(o); len(got) != 1 {
				t.Errorf("setting %s alone: Changes = %v, want one field", f.Name, got)
			}
		})
	}
}
