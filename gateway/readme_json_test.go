package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEJSONBlocks holds the ```json blocks of the project's Markdown
// files to JSON: each is JSON whole (a client's config a newcomer pastes
// first, an answer), or the members of an object ("toolgate": {…}, to put
// in a config), unless it shortens a longer text with "…". Annotated ones
// are ```jsonc, which this leaves alone.
func TestREADMEJSONBlocks(t *testing.T) {
	checked := 0
	for _, f := range []string{"README.md", "CHANGELOG.md", "examples/README.md"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```json" {
				continue
			}
			start := i + 1
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			}
			block := strings.Join(lines[start:i], "\n")
			if strings.Contains(block, "…") {
				continue // a shortened output, not a text to paste
			}
			checked++
			if err := json.Unmarshal([]byte(block), new(any)); err != nil && json.Unmarshal([]byte("{"+block+"}"), new(any)) != nil {
				t.Errorf("%s:%d: a ```json block that is not JSON (%v), nor the members of an object: correct it, or mark it ```jsonc if it is annotated", f, start, err)
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d ```json blocks found: is the pattern still right?", checked)
	}
	t.Logf("%d json blocks checked", checked)
}
