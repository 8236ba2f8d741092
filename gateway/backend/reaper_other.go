//go:build !linux

package backend

import (
	"fmt"
	"os"
)

// EnvReaper is set in the environment of a reaper process (Linux only; see
// reaper_linux.go).
const EnvReaper = "TOOLGATE_BACKEND_REAPER"

// reaperAvailable reports whether Options.Reaper can be honoured here.
const reaperAvailable = false

// IsReaper reports whether this process was started as a backend's reaper.
func IsReaper() bool { return os.Getenv(EnvReaper) != "" }

// ReaperMain exits: reapers exist on Linux only.
func ReaperMain() {
	fmt.Fprintln(os.Stderr, "toolgate reaper: only supported on Linux")
	os.Exit(127)
}

// selfExecutable is the file to run this toolgate again (no reaper here).
func selfExecutable() (string, error) { return os.Executable() }

// childOf is 0: only Linux runs a reaper.
func childOf(int) int { return 0 }
