package embed

/*
#cgo LDFLAGS: -ltokenizers -ldl -lm -lstdc++
#include <stdlib.h>

// From the tokenizers library's C interface (tokenizers.h of
// github.com/daulet/tokenizers); TestProbeTokenizer fails if they change.
void *from_file(const char *config);
void free_tokenizer(void *ptr);
*/
import "C"

import "unsafe"

// probeTokenizerFile reports whether the Rust library can load path as a
// tokenizer. It calls from_file directly: the Go wrapper's FromFile reads C
// errno after the call and returns nil whenever errno is set, even when the
// load succeeded (errno is left over from whatever syscall the Rust side made
// last), which made a valid file look invalid now and then. from_file itself
// returns NULL on a bad file, where from_bytes* panics across the FFI boundary
// and aborts the process — hence the probe before the real load.
func probeTokenizerFile(path string) bool {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.from_file(cpath) // one result: cgo does not read errno
	if h == nil {
		return false
	}
	C.free_tokenizer(h)
	return true
}
