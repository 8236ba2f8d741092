package embed

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// benchPhrases are short tool descriptions, the texts toolgate embeds most.
var benchPhrases = []string{
	"Create multiple new entities in the knowledge graph",
	"Read the complete contents of a file from the file system.",
	"Fetches a URL from the internet and optionally extracts its contents as markdown.",
	"Get the current time in a specific timezone.",
	"Take a screenshot of the current page or a specific element.",
	"Create a new issue in a GitHub repository with a title, body, labels and assignees.",
	"List open pull requests for a repository, filtered by base branch and author.",
	"Run a SQL query against the analytics warehouse and return the rows as JSON.",
	"Send a message to a Slack channel or a direct message to a user.",
	"Search the web for recent news articles about a topic.",
	"remember that Alice works at Acme",
	"what's the weather in Tokyo tomorrow?",
}

func benchTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s (%d)", benchPhrases[i%len(benchPhrases)], i)
	}
	return out
}

// BenchmarkEmbed measures throughput (texts/s) per variant and batch size,
// one caller, default options (a pool of 2 sessions, CPUs split among them):
//
//	source scripts/native-env.sh && go test ./embed -run '^$' -bench 'Embed$' -benchtime 3s
func BenchmarkEmbed(b *testing.B) {
	for _, v := range []Variant{FP32, INT8} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/batch%d", v, batch), func(b *testing.B) {
				e := testEmbedder(b, v)
				// Both batch sizes embed the same 32 texts (18 tokens on average),
				// batch 1 one at a time in turn.
				all := benchTexts(32)
				ctx := context.Background()
				if _, err := e.Embed(ctx, all[:batch]); err != nil { // warm up
					b.Fatal(err)
				}
				i := 0
				for b.Loop() {
					texts := all[i : i+batch]
					i = (i + batch) % len(all)
					if _, err := e.Embed(ctx, texts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "texts/s")
			})
		}
	}
}

// BenchmarkSessions compares serialising callers on one session (all
// threads) with a pool of sessions (threads split among them): one caller
// with a batch of 32 (indexing) and 4 concurrent callers with batches of 1
// and 8 (searches):
//
//	go test ./embed -run '^$' -bench Sessions -benchtime 3s
func BenchmarkSessions(b *testing.B) {
	cases := []struct {
		name              string
		sessions, threads int
	}{
		{"serial-1x2threads", 1, 2},
		{"pool-2x1thread", 2, 1},
		{"pool-2x2threads", 2, 2},
	}
	loads := []struct {
		callers, batch int
	}{{1, 32}, {4, 1}, {4, 8}}
	for _, load := range loads {
		for _, tc := range cases {
			b.Run(fmt.Sprintf("callers%d/batch%d/%s", load.callers, load.batch, tc.name), func(b *testing.B) {
				e, err := New(installed(Options{Sessions: tc.sessions, Threads: tc.threads}))
				testenv.Require(b, err)
				defer e.Close()
				texts := benchTexts(load.batch)
				ctx := context.Background()
				if _, err := e.Embed(ctx, texts); err != nil { // warm up
					b.Fatal(err)
				}
				b.SetParallelism(load.callers) // GOMAXPROCS=2: callers×2 goroutines, so halve below
				if load.callers > 1 {
					b.SetParallelism(load.callers / 2)
				}
				b.ResetTimer()
				if load.callers == 1 {
					for i := 0; i < b.N; i++ {
						if _, err := e.Embed(ctx, texts); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := e.Embed(ctx, texts); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N*load.batch)/b.Elapsed().Seconds(), "texts/s")
			})
		}
	}
}

// BenchmarkLoadRSS reports the process's resident memory after loading a
// variant and embedding one batch (run one variant per process for a clean
// figure):
//
//	go test ./embed -run '^$' -bench 'LoadRSS/fp32' -benchtime 1x
//	go test ./embed -run '^$' -bench 'LoadRSS/int8' -benchtime 1x
func BenchmarkLoadRSS(b *testing.B) {
	for _, v := range []Variant{FP32, INT8} {
		b.Run(string(v), func(b *testing.B) {
			before := procStatusKiB(b, "VmRSS")
			var once sync.Once
			for b.Loop() {
				once.Do(func() {
					e := testEmbedder(b, v)
					if _, err := e.Embed(context.Background(), benchTexts(32)); err != nil {
						b.Fatal(err)
					}
				})
			}
			after := procStatusKiB(b, "VmRSS")
			b.ReportMetric(float64(after)/1024, "rss_MiB")
			b.ReportMetric(float64(after-before)/1024, "rss_delta_MiB")
			b.ReportMetric(float64(procStatusKiB(b, "VmHWM"))/1024, "peak_rss_MiB")
		})
	}
}

func procStatusKiB(b *testing.B, key string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n
		}
	}
	b.Skipf("no %s in /proc/self/status", key)
	return 0
}

// BenchmarkCacheQueries reports what the embedding cache's compactions cost
// a gateway that searches: 30,000 tool texts' vectors stored for good (the
// three views of 10,000 tools, 45 MB) and compacted, then b.N searches,
// each one query's vector stored with its TTL as serve stores it. It
// reports the MB of tables of tools' vectors that compactions wrote again
// during the searches (0 when the queries' key range overlaps none of
// them; a compaction builds its tables in the Go heap):
//
//	go test ./embed -run '^$' -bench CacheQueries -benchtime 20000x
func BenchmarkCacheQueries(b *testing.B) {
	const tools, dim = 30000, 384
	inner := &fakeModel{id: "fake/bench@1", dim: dim}
	dir := b.TempDir()
	c, err := NewCached(inner, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	texts := benchTexts(tools)
	for i := 0; i < tools; i += 256 {
		if _, err := c.Embed(ctx, texts[i:min(i+256, tools)]); err != nil {
			b.Fatal(err)
		}
	}
	// A catalog indexed a while ago: its vectors flushed and compacted
	// out of level 0.
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	if c, err = NewCached(inner, dir, nil); err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.store.db.Flatten(2); err != nil {
		b.Fatal(err)
	}
	before := map[uint64]bool{}
	for _, t := range c.store.db.Tables() {
		before[t.ID] = true
	}
	i := 0
	for b.Loop() {
		if _, err := c.EmbedQueries(ctx, []string{fmt.Sprintf("search number %d", i)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	var rewritten int64
	for _, t := range c.store.db.Tables() {
		if !before[t.ID] && len(t.Left) > 0 && t.Left[0] <= keyVecPfx {
			rewritten += int64(t.OnDiskSize)
		}
	}
	b.ReportMetric(float64(rewritten)/1e6, "tool-MB-rewritten")
}
