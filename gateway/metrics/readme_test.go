package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/search"
)

// TestREADMETable holds the README's table of metrics to the registry:
// every toolgate_* metric with its type and labels, no more, no less, and
// every other family /metrics serves covered by the table's row of the
// library's own (go_*, process_*, promhttp_metric_handler_errors_total).
func TestREADMETable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(toolgate_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		labels := strings.Fields(strings.NewReplacer("`", "", ",", " ").Replace(m[3]))
		slices.Sort(labels)
		documented[m[1]] = m[2] + " " + strings.Join(labels, ",")
	}

	// The row without a type names the library's families, globs allowed.
	var others []string
	if r := regexp.MustCompile("(?m)^\\| (`[a-z_*]+`(?:, `[a-z_*]+`)*) \\| \\|").FindStringSubmatch(string(b)); r != nil {
		for _, name := range strings.Split(r[1], ", ") {
			others = append(others, strings.Trim(name, "`"))
		}
	}

	// Every metric gets a sample, so that every family is gathered, and
	// the handler serve mounts registers its own (promhttp's error count).
	m := newTest()
	m.Handler()
	ctx := context.Background()
	_, _ = m.Searcher(&fakeCatalog{tools}).Search(ctx, search.Query{Text: "x"})
	_, _ = m.Caller(callerFunc(func(string, string) (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil })).CallTool(ctx, "memory", "read_graph", nil)
	m.Trimmed(gateway.Trimmed{Server: "memory", Tool: "read_graph", Cut: 1})
	m.OutputMismatch("memory", "read_graph")
	m.HTTP(http.NotFoundHandler(), func(*http.Request) string { return "" }).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "toolgate_") {
			if !slices.ContainsFunc(others, func(glob string) bool { ok, _ := path.Match(glob, mf.GetName()); return ok }) {
				t.Errorf("/metrics serves %s, which the README's table does not name (its row of %s)", mf.GetName(), strings.Join(others, ", "))
			}
			continue
		}
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		registered[mf.GetName()] = strings.ToLower(mf.GetType().String()) + " " + strings.Join(labels, ",")
	}
	if diff := cmp.Diff(registered, documented); diff != "" {
		t.Errorf("README's metrics table (-registered +documented): a metric registered is a row of the table in README.md's \"### Metrics\" (`name` | type | labels | what), and a row is a metric registered here:\n%s", diff)
	}
	// A metric the README names anywhere else (an alert rule, a query,
	// the prose) is one /metrics serves: a histogram's series included.
	for i, line := range strings.Split(string(b), "\n") {
		for _, name := range regexp.MustCompile(`\btoolgate_[a-z][a-z0-9_]*`).FindAllString(line, -1) {
			family := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && strings.HasPrefix(registered[base], "histogram") {
					family = base
				}
			}
			if _, ok := registered[family]; !ok {
				t.Errorf("README.md:%d names the metric %s, which /metrics does not serve: correct the name (the table in \"### Metrics\" lists those served)", i+1, name)
			}
		}
	}
	// And the names, units and help texts keep Prometheus' conventions
	// (a counter ends in _total, a duration is in _seconds …), which
	// dashboards and recording rules rely on.
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
