package index

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// Gateways of two configs on one data folder write the index in turn (one
// re-indexes, then the other, or `toolgate index --config` of one while
// the other serves). The second runs without the embedding cache, which
// the first holds: each build used to embed again every tool that the
// other config's catalog, the one on disk, lacked, and each start after
// the other's build was a cold one. The index folder now keeps the last
// generation of each other config, for its vectors and its warm start.
func TestIndexOfTwoConfigs(t *testing.T) {
	dir := t.TempDir()
	all := testTools()
	var a, b []catalog.Tool // a: filesystem, memory; b: memory, github, my server
	for _, tl := range all {
		if tl.Server != "github" && tl.Server != "my server" {
			a = append(a, tl)
		}
		if tl.Server != "filesystem" {
			b = append(b, tl)
		}
	}
	emb := &fakeEmbedder{id: "fake/1", dim: 32} // no cache: the other gateway holds it
	ensureFor(t, dir, a, emb, "/etc/a.json")
	_, rep := ensureFor(t, dir, b, emb, "/etc/b.json")
	if rep.Embedded != 2 || rep.Reused != 2 { // github's and my server's tools
		t.Errorf("b after a: embedded %d, reused %d; want 2 and 2", rep.Embedded, rep.Reused)
	}
	_, rep = ensureFor(t, dir, a, emb, "/etc/a.json")
	if rep.Embedded != 0 || rep.Reused != len(a) {
		t.Errorf("a again after b: embedded %d, reused %d; want 0 and %d (the tools of filesystem embedded again)", rep.Embedded, rep.Reused, len(a))
	}

	// Each config finds its own catalog to start warm from, whichever
	// was written last.
	for _, c := range []struct {
		name  string
		tools []catalog.Tool
	}{{"/etc/a.json", a}, {"/etc/b.json", b}} {
		ix, err := OpenFor(dir, ServersOf(c.tools), &Options{Config: c.name})
		if err != nil {
			t.Fatalf("OpenFor(%s): %v", c.name, err)
		}
		if ix.Fingerprint() != catalog.Fingerprint(c.tools) {
			t.Errorf("OpenFor(%s) opened the catalog of servers %v", c.name, ServersOf(ix.Tools()))
		}
		ix.Close()
	}
	// b's config edited since, so that its index holds a server it does
	// not list: the current index, which the caller finds does not fit.
	ix, err := OpenFor(dir, []string{"memory"}, &Options{Config: "/etc/b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if ix.Fingerprint() != catalog.Fingerprint(a) {
		t.Errorf("OpenFor(memory) opened the catalog of servers %v; want the current one", ServersOf(ix.Tools()))
	}
	ix.Close()
	// A build of no config (a tools file) keeps both.
	ensureFor(t, dir, b[:1], emb, "")
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Others) != 2 || m.Others[0].Config != "/etc/a.json" || m.Others[1].Config != "/etc/b.json" {
		t.Errorf("kept after a build of no config: %+v", m.Others)
	}
	// Open, for a caller without a config, still opens the current one.
	if ix, err := Open(dir, nil); err != nil || ix.Fingerprint() != catalog.Fingerprint(b[:1]) {
		t.Errorf("Open: %v", err)
	} else {
		ix.Close()
	}
}

// The generations kept for other configs are bounded: the last one of
// each, KeepOthers of them at most, the same config's replaced.
func TestIndexOthersBounded(t *testing.T) {
	dir := t.TempDir()
	emb := &fakeEmbedder{id: "fake/1", dim: 32}
	for i := range KeepOthers + 3 {
		tools := []catalog.Tool{{Server: fmt.Sprintf("s%d", i), Name: "t", Description: "a tool"}}
		ensureFor(t, dir, tools, emb, fmt.Sprintf("/etc/%d.json", i))
		tools[0].Description = "a tool, changed"
		ensureFor(t, dir, tools, emb, fmt.Sprintf("/etc/%d.json", i))
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Others) != KeepOthers {
		t.Fatalf("manifest keeps %d other generations, want %d", len(m.Others), KeepOthers)
	}
	var want []int
	for i := KeepOthers; i >= 0; i-- {
		want = append(want, m.Generation-2*i)
	}
	assertGenerations(t, dir, want...)
}

func ensureFor(t *testing.T, dir string, tools []catalog.Tool, emb Embedder, config string) (*Index, Report) {
	t.Helper()
	ix, rep, err := EnsureReport(context.Background(), dir, tools, emb, &Options{Config: config})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, rep
}

// Indexes lists every index the folder keeps (what `toolgate doctor`
// shows), the current one first, and whether each opens; StartingPoint
// names the one a config's gateway starts from.
func TestIndexesOfTwoConfigs(t *testing.T) {
	dir := t.TempDir()
	if ks, err := Indexes(dir); err != nil || len(ks) != 0 {
		t.Fatalf("Indexes of an empty folder: %v, %v", ks, err)
	}
	a, b := splitGithub()
	emb := &fakeEmbedder{id: "fake/1", dim: 32}
	ensureFor(t, dir, a, emb, "/etc/a.json")
	ensureFor(t, dir, b, emb, "/etc/b.json")
	ks, err := Indexes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || !ks[0].Current || ks[0].Config != "/etc/b.json" || ks[0].Tools != len(b) ||
		ks[1].Current || ks[1].Config != "/etc/a.json" || ks[1].Tools != len(a) || ks[0].Err != nil || ks[1].Err != nil {
		t.Fatalf("Indexes: %+v", ks)
	}
	if len(ks[0].Others) != 0 {
		t.Errorf("the current index's entry repeats the others: %+v", ks[0].Others)
	}
	m, err := StartingPoint(dir, ServersOf(a), &Options{Config: "/etc/a.json"})
	if err != nil || m.Generation != ks[1].Generation {
		t.Errorf("a starts from %+v (%v), want generation %d", m, err, ks[1].Generation)
	}
	m, err = StartingPoint(dir, ServersOf(b), &Options{Config: "/etc/b.json"})
	if err != nil || m.Generation != ks[0].Generation {
		t.Errorf("b starts from %+v (%v), want generation %d", m, err, ks[0].Generation)
	}
	// a's generation gone: it does not open, and a starts from the current one.
	if err := os.RemoveAll(genDir(dir, ks[1].Generation)); err != nil {
		t.Fatal(err)
	}
	ks, err = Indexes(dir)
	if err != nil || len(ks) != 2 || ks[1].Err == nil || ks[0].Err != nil {
		t.Fatalf("Indexes with a's generation removed: %+v, %v", ks, err)
	}
	if m, err := StartingPoint(dir, ServersOf(a), &Options{Config: "/etc/a.json"}); err != nil || m.Generation != ks[0].Generation {
		t.Errorf("a starts from %+v (%v), want the current generation %d", m, err, ks[0].Generation)
	}
}

// Gateways of two configs on one data folder, one of them a toolgate of
// another index format (an upgrade of one gateway first, a rollback of
// one): each build kept no generation of another format, so each start
// after the other's build was a cold one that embedded its catalog again,
// and the other's index was thrown away. The generation of another format
// is now kept for its config like any other's (neither reads the other's),
// and each starts from and reuses its own.
func TestIndexOfTwoFormats(t *testing.T) {
	dir := t.TempDir()
	a, b := splitGithub()
	emb := &fakeEmbedder{id: "fake/1", dim: 32}
	ensureFor(t, dir, a, emb, "/etc/a.json")
	// The gateway of new.json, a toolgate of the next format, builds:
	// as this code would, keeping a's, then its manifest says its format.
	ensureFor(t, dir, b, emb, "/etc/new.json")
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	newer := m.Generation
	m.Format = FormatVersion + 1
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	// a's gateway starts from its own, not from the newer one's.
	ix, err := OpenFor(dir, ServersOf(a), &Options{Config: "/etc/a.json", AnyFormat: true})
	if err != nil {
		t.Fatal(err)
	}
	if ix.Fingerprint() != catalog.Fingerprint(a) || ix.OtherFormat() != 0 {
		t.Errorf("a's gateway starts from the catalog of %v (format %d), want its own", ServersOf(ix.Tools()), ix.OtherFormat())
	}
	ix.Close()
	// a's build takes its vectors from its own, and keeps the newer one's.
	embedded := emb.texts
	_, rep := ensureFor(t, dir, a, emb, "/etc/a.json")
	if rep.Reused != len(a) || emb.texts != embedded {
		t.Errorf("a's build after the newer one's: reused %d of %d, embedded %d", rep.Reused, len(a), rep.Embedded)
	}
	m, err = readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Others) != 1 || m.Others[0].Generation != newer || m.Others[0].Format != FormatVersion+1 || m.Others[0].Config != "/etc/new.json" {
		t.Fatalf("after a's build, kept: %+v; want the newer toolgate's generation %d", m.Others, newer)
	}
	assertGenerations(t, dir, newer, m.Generation)
	// A build of the same config by this toolgate replaces the other
	// format's (an upgrade of one gateway): it is not kept beside.
	ensureFor(t, dir, b, emb, "/etc/new.json")
	if m, _ = readManifest(dir); len(m.Others) != 1 || m.Others[0].Config != "/etc/a.json" {
		t.Errorf("after new.json's build by this toolgate, kept: %+v; want a's only", m.Others)
	}
}

// splitGithub splits testTools into the tools of every server but
// github's, and github's.
func splitGithub() (rest, github []catalog.Tool) {
	for _, tl := range testTools() {
		if tl.Server != "github" {
			rest = append(rest, tl)
		} else {
			github = append(github, tl)
		}
	}
	return rest, github
}
