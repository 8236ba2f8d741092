package live

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/audit/audittest"
)

// A reload that SIGHUP applies writes one audit record per server it
// added or removed, one that it rejected a record with the error, and a
// management tool's Reload (which records its own change) none.
func TestReloadAudited(t *testing.T) {
	pool := newFakePool("a", "b")
	hup := make(chan os.Signal, 1)
	log := &audittest.Log{}
	seen := 0
	take := func() []audit.Record { // the records written since the last take
		recs := log.Records()
		defer func() { seen = len(recs) }()
		return recs[seen:]
	}
	// A debounce of an hour: only the signal reloads.
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Hour, Reload: hup, Audit: log}, "a", "b")
	f.run(t)

	writeFile(t, f.path, configBytes(t, nil, "a", "c"))
	hup <- syscall.SIGHUP
	f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	type short struct{ Transport, Action, Server, Decision, Outcome, Reason string }
	shorten := func(recs []audit.Record) []short {
		var out []short
		for _, r := range recs {
			if r.Time.IsZero() {
				t.Errorf("record %+v has no time", r)
			}
			out = append(out, short{r.Transport, r.Action, r.Server, r.Decision, r.Outcome, r.Reason})
		}
		return out
	}
	want := []short{
		{"signal", audit.ConfigReload, "c", audit.Allowed, audit.OK, `server "c" added to ` + f.path + " (SIGHUP)"},
		{"signal", audit.ConfigReload, "b", audit.Allowed, audit.OK, `server "b" removed from ` + f.path + " (SIGHUP)"},
	}
	if diff := cmp.Diff(want, shorten(take())); diff != "" {
		t.Errorf("the records of the reload (-want +got):\n%s", diff)
	}

	writeFile(t, f.path, []byte(`{"mcpServers": {`))
	hup <- syscall.SIGHUP
	f.wait(t, "the rejected reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	got := take()
	if len(got) != 1 || got[0].Outcome != audit.IsError || got[0].Server != "" || got[0].Action != audit.ConfigReload ||
		!strings.HasPrefix(got[0].Reason, f.path+" rejected (SIGHUP); the previous config stays in effect: ") {
		t.Errorf("the records of the rejected reload: %+v", got)
	}

	// A management tool's edit: its own record says what it changed.
	writeFile(t, f.path, configBytes(t, nil, "a"))
	if r := f.loop.Reload(context.Background(), "toolgate__remove_server"); r == nil || len(r.Removed) != 1 {
		t.Fatalf("Reload = %+v, want c removed", r)
	}
	if got := take(); len(got) != 0 {
		t.Errorf("a management tool's reload wrote %+v, want no record", got)
	}
}

// A server updated in place, or restarted, is recorded with the fields of
// its entry that changed: a reload that changed only maxResultBytes read
// "updated (timeouts, description, language: …)", none of which changed.
func TestReloadAuditNamesInPlaceFields(t *testing.T) {
	log := &audittest.Log{}
	l := &Loop{opts: Options{Audit: log, ConfigPaths: []string{"servers.json"}}}
	l.auditReload(&Reload{At: time.Now(), Trigger: "file changed", Updated: []string{"fs"}, Changed: []string{"git"},
		Fields: map[string][]string{"fs": {"maxResultBytes"}, "git": {"args", "env"}}}, "file")
	recs := log.Records()
	want := []string{`server "git" changed (args, env: restarted) in servers.json (file changed)`,
		`server "fs" updated (maxResultBytes: applied in place) in servers.json (file changed)`}
	if len(recs) != 2 || recs[0].Reason != want[0] || recs[1].Reason != want[1] {
		t.Errorf("records %+v, want two that read %q", recs, want)
	}
}

// TestReloadAuditsProfilesAndSettings: a reload that changes who sees
// what — a profile added, changed or removed — writes one record per
// profile, with the profile in the record (`audit tail --profile dev`
// finds it), and one for the other settings it applied. A reload that
// changed no server wrote none, so "when did dev get the management
// tools" had no answer in the audit log.
func TestReloadAuditsProfilesAndSettings(t *testing.T) {
	pool := newFakePool("a", "b")
	hup := make(chan os.Signal, 1)
	log := &audittest.Log{}
	profiles := func(p map[string]any) map[string]any { return map[string]any{"profiles": p} }
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Hour, Reload: hup, Audit: log}, "a", "b")
	f.run(t)
	writeFile(t, f.path, configBytes(t, profiles(map[string]any{"dev": map[string]any{"servers": []string{"a"}}, "old": map[string]any{}}), "a", "b"))
	hup <- syscall.SIGHUP
	f.wait(t, "the first reload", func(s Stats) bool { return s.ReloadGeneration >= 1 })
	before := len(log.Records()) // dev and old added
	settings := profiles(map[string]any{"dev": map[string]any{"servers": []string{"a", "toolgate"}}, "qa": map[string]any{"readOnly": true}})
	settings["management"] = map[string]any{"allowConfigChanges": true}
	writeFile(t, f.path, configBytes(t, settings, "a", "b"))
	hup <- syscall.SIGHUP
	f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration >= 2 })
	type short struct{ Action, Server, Profile, Reason string }
	var got []short
	for _, r := range log.Records()[before:] {
		got = append(got, short{r.Action, r.Server, r.Profile, r.Reason})
	}
	want := []short{
		{audit.ConfigReload, "", "dev", `profile "dev" changed in ` + f.path + " (SIGHUP)"},
		{audit.ConfigReload, "", "qa", `profile "qa" added to ` + f.path + " (SIGHUP)"},
		{audit.ConfigReload, "", "old", `profile "old" removed from ` + f.path + " (SIGHUP)"},
		{audit.ConfigReload, "", "", "settings toolgate.management applied from " + f.path + " (SIGHUP)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the records of a reload of profiles and a setting (-want +got):\n%s", diff)
	}
}
