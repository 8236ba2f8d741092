package main

import (
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// The commit in eval's "run": Go's VCS stamp when the build has one, else
// the revision the Makefile stamps with -ldflags (a build with
// -buildvcs=false, in GOFLAGS here and on CI, has no VCS stamp), else
// "unknown" with why: it was left out, and nothing said why.
func TestBuildCommit(t *testing.T) {
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	none := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}}
	for _, tc := range []struct {
		name             string
		info             *debug.BuildInfo
		stamped          string
		commit, whyWords string
	}{
		{"vcs", vcs, "", "abc123+dirty", ""},
		{"vcs and ldflags", vcs, "def456", "abc123+dirty", ""},
		{"ldflags", none, "def456", "def456", ""},
		{"neither", none, "", "unknown", "built without VCS information (go build -buildvcs=false, GOFLAGS=-buildvcs=false, go run, or outside a git checkout) and without the revision make build stamps (-ldflags -X main.commit=…): build with make build"},
		{"no build info", nil, "", "unknown", "build with make build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit, why := commitOf(tc.info, tc.stamped)
			if commit != tc.commit || (tc.whyWords == "") != (why == "") || !strings.Contains(why, tc.whyWords) {
				t.Errorf("commitOf = %q, %q; want %q, %q", commit, why, tc.commit, tc.whyWords)
			}
		})
	}
}

// make build stamps the revision (and "+dirty") from one place, the
// Makefile's COMMIT, into main.commit: `make -n build` shows it.
func TestMakefileStampsCommit(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (the tests run in a git checkout)", err)
	}
	out, err := exec.Command("make", "-C", "../..", "-n", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	want := regexp.MustCompile(`go build -ldflags '-X main\.commit=` + strings.TrimSpace(string(head)) + `(\+dirty)?' -o bin/toolgate \./cmd/toolgate`)
	if !want.Match(out) {
		t.Errorf("make -n build does not stamp the commit (want %s):\n%s", want, out)
	}
}
