package embed

import (
	"fmt"
	"os"
	"strings"

	"github.com/daulet/tokenizers"
)

// tokenizer wraps the Hugging Face tokenizer (Rust, via cgo) with the
// truncation toolgate uses. The Rust Tokenizer is immutable after load and
// safe for concurrent Encode calls.
type tokenizer struct {
	tk     *tokenizers.Tokenizer
	maxLen int
	empty  []int64 // ids of "" ([CLS] [SEP]), used if an encoding fails
}

// tokenizersParallelism is the tokenizers library's switch for its thread
// pool, set to false before main (embed.go's init). The library pads each
// encoding on Rayon's global pool, which it starts (one thread per core) at
// the first encoding; a process that may not create a thread then (ulimit
// -u, TasksMax= of a systemd unit, a container's pids limit) aborts in Rust
// ("The global thread pool has not been initialized"), and the gateway with
// it. toolgate encodes one text per call, so the pool gains nothing. The
// library reads the variable at every encoding; stdio backends do not
// inherit it (backend.DefaultEnvAllow). TestTokenizerWithoutThreads.
const tokenizersParallelism = "TOKENIZERS_PARALLELISM"

// newTokenizer loads tokenizer.json with truncation at maxLen tokens
// (special tokens included, as sentence-transformers does); fix is the
// command that installs the file again (Paths.FixModel).
func newTokenizer(path string, maxLen int, fix string) (*tokenizer, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, &MissingError{Piece: "tokenizer file", Path: path, Fix: fix, Err: err}
	}
	// Read first: a file that cannot be opened (out of descriptors) is not
	// one that is not a tokenizer, which is all the probe can say.
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w (%s)", err, limitFix(err, "re-fetch it with "+fix))
	}
	if !probeTokenizerFile(path) {
		return nil, fmt.Errorf("load tokenizer %s: not a valid Hugging Face tokenizer.json: re-fetch it with %s", path, fix)
	}
	// from_bytes_with_truncation overrides the file's own truncation (the
	// langchain4j copy says 128; the model was trained and is used at 256).
	tk, err := tokenizers.FromBytesWithTruncation(data, uint32(maxLen), tokenizers.TruncationDirectionRight)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	t := &tokenizer{tk: tk, maxLen: maxLen}
	if t.empty = t.encode(""); len(t.empty) == 0 {
		t.close()
		return nil, fmt.Errorf("load tokenizer %s: it adds no special tokens; not a BERT tokenizer.json", path)
	}
	return t, nil
}

// encode returns the token ids of text with [CLS]/[SEP], truncated to maxLen,
// without any padding the tokenizer file may ask for (padding is applied per
// batch instead).
func (t *tokenizer) encode(text string) []int64 {
	// C strings end at NUL, and the Rust side rejects invalid UTF-8 with an
	// empty result. BERT's normaliser drops NUL and maps invalid bytes to
	// U+FFFD ([UNK]), so this keeps the reference ids.
	text = strings.ToValidUTF8(strings.ReplaceAll(text, "\x00", ""), "\uFFFD")
	enc := t.tk.EncodeWithOptions(text, true, tokenizers.WithReturnAttentionMask())
	ids := make([]int64, 0, len(enc.IDs))
	for i, id := range enc.IDs {
		if i < len(enc.AttentionMask) && enc.AttentionMask[i] == 0 {
			continue // padding from the file's "padding" section
		}
		ids = append(ids, int64(id))
	}
	if len(ids) == 0 && t.empty != nil {
		// The Rust side returns nothing when it cannot encode; an empty
		// text's vector beats a zero vector.
		return t.empty
	}
	return ids
}

func (t *tokenizer) close() {
	if t != nil && t.tk != nil {
		t.tk.Close()
		t.tk = nil
	}
}

// count returns the number of tokens of text (special tokens included)
// without truncation, for token-economy figures. Like encode, it leaves out
// the padding the tokenizer file may ask for (Xenova's pads to 128).
func (t *tokenizer) count(text string) int {
	text = strings.ToValidUTF8(strings.ReplaceAll(text, "\x00", ""), "\uFFFD")
	enc := t.tk.EncodeWithOptions(text, true, tokenizers.WithReturnAttentionMask())
	n := 0
	for i := range enc.IDs {
		if i >= len(enc.AttentionMask) || enc.AttentionMask[i] != 0 {
			n++
		}
	}
	return n
}
