package linerpc

import (
	"os"
	"sync"
)

// stdin and stdout are the gateway's stdio as pollable files (see
// pollable), made once: Stdio, StdioFrom and WatchStdin share them.
var (
	stdin  = sync.OnceValue(func() *os.File { return pollable(os.Stdin, os.Stderr) })
	stdout = sync.OnceValue(func() *os.File { return pollable(os.Stdout, os.Stderr) })
)
