package backend

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A reaper is a tiny supervisor between the gateway and one stdio backend,
// run when Options.Reaper is set: the gateway's own executable re-executed
// with EnvReaper set (its main must call ReaperMain first thing when
// IsReaper reports true). It makes "no backend process outlives the
// gateway" hold for grandchildren too, which a parent-death signal on the
// direct child cannot: an npx → node chain, or a server that forks helpers
// that ignore stdin EOF, would be orphaned to init when the gateway is
// SIGKILLed.
//
// The reaper
//   - marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER, no
//     privileges needed), so every orphan of the backend's process tree is
//     re-parented to it rather than to init, even one that left the process
//     group with setsid;
//   - starts the backend with the reaper's stdin/stdout/stderr (then drops
//     its own copies, so the gateway sees EOF exactly when the backend's
//     tree is done) and a parent-death signal tied to the reaper;
//   - holds the read end of a "lifeline" pipe (fd 3) whose only write end is
//     in the gateway: EOF on it means the gateway is gone, however it died,
//     and the reaper SIGKILLs every descendant and exits;
//   - when the backend exits, stops what it left behind (SIGTERM, then
//     SIGKILL after half a second) and exits with the backend's status (re-raising
//     its signal), so the gateway's messages read as before;
//   - forwards SIGTERM/SIGINT/SIGHUP to every live descendant, the backend
//     among them, and goes on waiting: once the backend has exited it stops the
//     leftovers and exits with the backend's status, as above. (It forwarded
//     only to those outside its process group, for the gateway signalled the
//     group; a SIGTERM to the reaper alone, the PID a status shows, then
//     left both running. The gateway now signals the reaper alone, so each
//     process gets one SIGTERM.)
//
// The reaper is the process the gateway started: Status.PID and the process
// group are the reaper's.

// EnvReaper is set in the environment of a reaper process (and removed
// before the backend starts). Its value "3" names the lifeline fd.
const EnvReaper = "TOOLGATE_BACKEND_REAPER"

// reaperAvailable reports whether Options.Reaper can be honoured here.
const reaperAvailable = true

// IsReaper reports whether this process was started as a backend's reaper.
// A binary whose pools set Options.Reaper checks it first thing in main:
//
//	if backend.IsReaper() {
//		backend.ReaperMain()
//	}
func IsReaper() bool { return os.Getenv(EnvReaper) != "" }

// A reaper's main goroutine stays on the main thread (locked in an init,
// so from before main): the backend is then forked by the main thread,
// whose children file (/proc/<pid>/task/<pid>/children) childOf reads,
// and where orphans re-parented to the reaper go too. Locked only in
// reap, the goroutine could have moved to another thread by then, and the
// status said no ServerPID (seen under load).
func init() {
	if IsReaper() {
		runtime.LockOSThread()
	}
}

// ReaperMain runs the reaper (os.Args[1] is the backend's executable,
// os.Args[2:] its argv) and exits the process with the backend's status.
func ReaperMain() {
	os.Exit(reap())
}

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER

// reaperLeftoverGrace is how long what a backend left behind gets between
// SIGTERM and SIGKILL once the backend itself has exited.
const reaperLeftoverGrace = 500 * time.Millisecond

func reap() int {
	// The backend's parent-death signal fires when the thread that forked it
	// ends: keep that thread for the whole life of the process.
	runtime.LockOSThread()
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "toolgate reaper: no command to run")
		return 127
	}
	path, argv := os.Args[1], os.Args[2:]
	lifelineFD, _ := strconv.Atoi(os.Getenv(EnvReaper))
	if lifelineFD > 2 {
		// Passed to the reaper, so not close-on-exec: the backend must
		// not inherit it (every process of its tree held the read end).
		syscall.CloseOnExec(lifelineFD)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvReaper+"=") {
			env = append(env, kv)
		}
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "toolgate reaper: cannot become a child subreaper (grandchildren may outlive the gateway):", errno)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolgate reaper: start %s: %v\n", path, err)
		return 127
	}
	// Drop our copies of the pipes: EOF must come when the backend's tree
	// closes them, not when the reaper does.
	if null, err := syscall.Open(os.DevNull, syscall.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = syscall.Dup3(null, fd, 0)
		}
		_ = syscall.Close(null)
	}

	lifeline := make(chan struct{})
	if lifelineFD > 2 {
		f := os.NewFile(uintptr(lifelineFD), "lifeline")
		go func() {
			_, _ = io.Copy(io.Discard, f) // returns at EOF: every write end is closed
			close(lifeline)
		}()
	}
	exited := make(chan syscall.WaitStatus, 1)
	go waitAll(pid, exited)

	self := os.Getpid()
	for {
		select {
		case <-lifeline:
			// The gateway is gone. Nothing it started may stay. Repeat
			// until nothing is left: a dying process's children reach us
			// only when its last thread has exited.
			for range 500 {
				if killDescendants(self, syscall.SIGKILL) == 0 && liveDescendants(self) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			return 137
		case sig := <-sigs:
			killDescendants(self, sig.(syscall.Signal))
		case ws := <-exited:
			if killDescendants(self, syscall.SIGTERM) > 0 {
				deadline := time.Now().Add(reaperLeftoverGrace)
				for time.Now().Before(deadline) && liveDescendants(self) > 0 {
					time.Sleep(20 * time.Millisecond)
				}
				for range 100 {
					if killDescendants(self, syscall.SIGKILL) == 0 {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			return exitLike(ws)
		}
	}
}

// waitAll reaps every child (orphans re-parented to us included) and sends
// the status of pid once it exits.
func waitAll(pid int, exited chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil: // ECHILD: nothing to wait for right now
			time.Sleep(20 * time.Millisecond)
		case wpid == pid && (ws.Exited() || ws.Signaled()):
			exited <- ws
		}
	}
}

// exitLike returns the exit code for ws, or re-raises its signal on the
// reaper so the gateway sees the same "signal: killed".
func exitLike(ws syscall.WaitStatus) int {
	if ws.Exited() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second)
	}
	return 128 + int(sig)
}

// killDescendants signals every live descendant of root and returns how
// many it signalled.
func killDescendants(root int, sig syscall.Signal) int {
	n := 0
	for _, d := range descendants(root) {
		if d.zombie {
			continue
		}
		if syscall.Kill(d.pid, sig) == nil {
			n++
		}
	}
	return n
}

type procInfo struct {
	pid, ppid int
	zombie    bool
}

// liveDescendants counts the descendants of root that are not zombies.
func liveDescendants(root int) int {
	n := 0
	for _, d := range descendants(root) {
		if !d.zombie {
			n++
		}
	}
	return n
}

// descendants lists the processes below root, from /proc. Zombies are
// included: a multi-threaded process whose leader thread has exited shows
// as a zombie while its other threads still run and are still the parents
// of its children, so skipping it would lose its subtree.
func descendants(root int) []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]procInfo{}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		pid, _ := strconv.Atoi(name)
		ppid, _ := strconv.Atoi(string(f[1]))
		zombie := f[0][0] == 'Z' || f[0][0] == 'X'
		children[ppid] = append(children[ppid], procInfo{pid, ppid, zombie})
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// selfExecutable is the file to run this very toolgate again (the reaper):
// /proc/self/exe, the running binary itself even once its path was
// removed or replaced (an upgrade, a rebuild, an uninstall while it runs),
// where os.Executable's path then named no file (every stdio server's next
// start failed: "fork/exec /usr/bin/toolgate: no such file or directory")
// or another version of toolgate. Without /proc, os.Executable.
func selfExecutable() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err == nil {
		return self, nil
	}
	return os.Executable()
}

// childOf is the first child of process pid (a reaper's: the server it
// started), 0 when it has none or /proc cannot tell.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, _ := strconv.Atoi(first)
	return n
}
