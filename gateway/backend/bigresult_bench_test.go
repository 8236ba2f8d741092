package backend

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// BenchmarkBigResultRead is what reading a 5 MB result costs the pool, by
// transport: rows in structuredContent (a log search's answer) and a log
// text, over stdio (a child process), streamable HTTP answering with an
// event stream and with plain JSON, and SSE. The HTTP servers run in the
// benchmark's process: their encoding of the result is counted too, the
// same before and after a change to the reading. The gateway's own work
// on the result after the read is gateway's BenchmarkBigResult.
//
//	go test ./gateway/backend -run '^$' -bench BigResultRead -benchtime 10x -count 3 -benchmem
func BenchmarkBigResultRead(b *testing.B) {
	const size = 5_000_000
	b.Setenv(backendtest.EnvHugeBytes, strconv.Itoa(size))
	modes := backendtest.ModeHugeOutput
	for _, tc := range everyTransport(modes, backendtest.EnvHugeBytes+"="+strconv.Itoa(size)) {
		for _, tool := range []string{"huge_rows", "huge"} {
			b.Run(fmt.Sprintf("%s-%s", tc.name, map[string]string{"huge_rows": "rows", "huge": "text"}[tool]), func(b *testing.B) {
				p := New([]config.Server{tc.server(b)}, testOptions(nil))
				b.Cleanup(func() { p.Close() })
				p.Start(context.Background())
				b.ReportAllocs()
				for b.Loop() {
					res, err := p.CallTool(context.Background(), "b", tool, nil)
					if err != nil || res.IsError {
						b.Fatalf("%s: %v %v", tool, err, res)
					}
				}
			})
		}
	}
}
