package live

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOnChange: the hook runs after each re-index swapped in and each
// reload applied, and not for a reload that is rejected.
func TestOnChange(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	// Reloads come from the file watcher only (a signal as well would
	// reload the same file twice); content seen before is not reloaded.
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a")
	var mu sync.Mutex
	var seen []uint64 // the reload generation at each call
	f.loop.OnChange(func() {
		g := f.loop.Stats().ReloadGeneration
		mu.Lock()
		seen = append(seen, g)
		mu.Unlock()
	})
	calls := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	f.run(t)

	pool.list("a", "apple", "avocado")
	f.loop.ToolsChanged("a", nil)
	testenv.Eventually(t, "the hook after the re-index", func() bool { return len(calls()) == 1 })

	writeFile(t, f.path, []byte("{not json"))
	f.wait(t, "the rejected reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	// Same servers, other settings: applied, and nothing to re-index.
	writeFile(t, f.path, configBytes(t, map[string]any{"callTimeout": "5s"}, "a"))
	testenv.Eventually(t, "the hook after the applied reload", func() bool { return len(calls()) == 2 })
	if got := calls(); !slices.Equal(got, []uint64{0, 2}) {
		t.Errorf("hook ran at reload generations %v, want [0 2] (the re-index, the applied reload; not the rejected one)", got)
	}
}
