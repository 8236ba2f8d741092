package backend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	segjson "github.com/segmentio/encoding/json"
	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/termtext"
)

// A proc is one running stdio backend process with its pipes. Its goroutines
// (waiter, stdout pump, stderr drain) end by stop.
type proc struct {
	name  string
	pid   int
	log   *slog.Logger
	cmd   *exec.Cmd
	stdin *os.File // parent's write end of the child's stdin
	out   *io.PipeReader
	outR  *os.File  // parent's read end of the child's stdout
	errR  *os.File  // parent's read end of the child's stderr
	tail  *lineTail // this process's last stderr lines, for its errors
	// noise is the first lines it wrote to stdout that are not JSON-RPC
	// (a usage text, a banner), for its errors.
	noise firstLines
	// history is the backend's last stderr lines across its processes
	// (Pool.Stderr); nil = none kept.
	history *lineTail
	mask    func(string) string
	exited  chan struct{} // closed once the leader is reaped
	// waitErr is cmd.Wait's result; read only after exited is closed.
	waitErr error

	// lifeline is the write end of a reaper's lifeline pipe (nil without a
	// reaper); closing it tells the reaper the gateway is gone.
	lifeline *os.File

	stderrDone chan struct{}
	stdoutDone chan struct{} // closed once stdout is read to its end
	readers    sync.WaitGroup
	stopOnce   sync.Once
}

type procConfig struct {
	envAllow    []string
	maxFrame    int
	stderrTail  int
	history     *lineTail // also gets each stderr line (may be nil)
	stderrRate  float64   // lines per second logged (burst 4×)
	log         *slog.Logger
	mask        func(string) string
	environment []string // the gateway's environment (os.Environ())
	reaper      bool     // run the command under a reaper (Options.Reaper)
}

// resolveCommand finds srv's command with the child's environment env and
// checks its cwd: what a start needs before anything is made. Its error
// says what to check.
func resolveCommand(srv config.Server, env []string) (string, error) {
	pathEnv := envLookup(env, "PATH")
	path, err := lookPath(srv.Command, pathEnv, srv.Cwd)
	if err != nil && errors.Is(err, errNotFound) {
		if fix := splitCommandLine(srv, pathEnv); fix != "" {
			return "", wholeCommandLine(fmt.Sprintf("command %q is not found, and reads as a whole command line: %s", srv.Command, fix))
		}
	}
	if err != nil {
		if errors.Is(err, errNotFound) && strings.Contains(srv.Command, "/") {
			// A path: PATH plays no part.
			if filepath.IsAbs(srv.Command) {
				return "", fmt.Errorf("command %s: check command", err.Error())
			}
			where := "toolgate's working directory"
			if srv.Cwd != "" {
				where = "the server's cwd " + srv.Cwd
			}
			return "", fmt.Errorf("command %s (a relative path is read from %s): check command", err.Error(), where)
		}
		if errors.Is(err, errNotFound) {
			return "", fmt.Errorf("command %s (%s%s): check command/PATH (the server's \"env\" may set PATH)", err.Error(), pathPrefix, pathEnv)
		}
		return "", fmt.Errorf("command: %w: check command", err)
	}
	if srv.Cwd != "" {
		if fi, err := os.Stat(srv.Cwd); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("cwd %q is not a directory: check cwd", srv.Cwd)
		}
	}
	return path, nil
}

// ErrWholeCommandLine is the error (errors.Is) of a command that is not
// found and holds a whole command line whose first word starts.
var ErrWholeCommandLine = errors.New(`a whole command line in "command"`)

type wholeCommandLine string

func (w wholeCommandLine) Error() string        { return string(w) }
func (w wholeCommandLine) Is(target error) bool { return target == ErrWholeCommandLine }

// splitCommandLine is the fix for a command written as a whole command
// line ("npx -y @modelcontextprotocol/server-memory") whose first word is a
// program that starts: "command" names the program, "args" the rest. ""
// when the command has no space or its first word does not start either.
func splitCommandLine(srv config.Server, pathEnv string) string {
	words := strings.Fields(srv.Command)
	if len(words) < 2 || strings.ContainsAny(srv.Command, `"'\`) {
		return ""
	}
	if _, err := lookPath(words[0], pathEnv, srv.Cwd); err != nil {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(append(slices.Clone(words[1:]), srv.Args...))
	return fmt.Sprintf(`"command" names the program alone and "args" the rest: "command": %q, "args": %s`, words[0], bytes.TrimSpace(b.Bytes()))
}

// CheckCommand says why a local server's command would not start with the
// environment environ (a shell's, os.Environ()) as a stdio server gets it
// (DefaultEnvAllow and its own "env"): not found in PATH, not executable,
// its cwd not a folder, or (any server) variables of its entry unset
// (config.Server.UnsetError); nil when it would start.
// What a start checks first, for a command that adds a server to say at
// once.
func CheckCommand(srv config.Server, environ []string) error {
	return checkCommand(srv, environ, DefaultEnvAllow)
}

// CheckCommand is the package's CheckCommand of the server the pool runs
// as server, with the gateway's environment and the pool's EnvAllow: what
// its next start finds. nil for a server the pool does not have.
func (p *Pool) CheckCommand(server string) error {
	srv, ok := p.roster.Load().cfgs[server]
	if !ok {
		return nil
	}
	return checkCommand(srv, os.Environ(), p.opts.EnvAllow)
}

// checkCommand says both what the entry's unset variables and what its
// command lack, so that an entry is fixed in one pass: a server with a
// token unset and a command not installed was said to want the token,
// and, once it was set, the command. The command is not looked for when
// an unset variable is in what finds it (command, cwd, env.PATH), which
// holds "" in its place.
func checkCommand(srv config.Server, environ, allow []string) error {
	unset := srv.UnsetError()
	if srv.Type != config.TypeStdio || srv.Command == "" || slices.ContainsFunc(srv.Unset, func(u config.UnsetVar) bool {
		return u.Field == "command" || u.Field == "cwd" || u.Field == "env.PATH"
	}) {
		return unset
	}
	if _, err := resolveCommand(srv, childEnv(environ, allow, srv.Env)); err != nil {
		err = &maskedError{err: err, msg: newErrMasker(srv)(err.Error())} // a PATH of its "env" is its value
		if unset != nil {
			return fmt.Errorf("%w; and %w", unset, err)
		}
		return err
	}
	return unset
}

// commandState is what a start of srv would find of its command and cwd:
// the resolved command's path, size, mode and modification time, or why
// it cannot be resolved. Two different states mean something changed (a
// command installed, replaced or made executable, a folder made).
func commandState(srv config.Server, env []string) string {
	path, err := resolveCommand(srv, env)
	if err != nil {
		return err.Error()
	}
	if !filepath.IsAbs(path) && srv.Cwd != "" {
		path = filepath.Join(srv.Cwd, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s %d %v %d", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
}

// maxArgFiles bounds the args argFilesState looks at.
const maxArgFiles = 16

// argFilesState describes the regular files that srv's args name (a path,
// absolute or relative to its cwd: the script of `node server.mjs`, the
// program of `python -m` aside), by size and modification time, so that a
// server that kept dying is started again once one of them changes: its
// author mended the script. Args that name no file are left out.
func argFilesState(srv config.Server) string {
	var b strings.Builder
	for _, a := range srv.Args[:min(len(srv.Args), maxArgFiles)] {
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		path := a
		if !filepath.IsAbs(path) && srv.Cwd != "" {
			path = filepath.Join(srv.Cwd, path)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			fmt.Fprintf(&b, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// startDir is toolgate's working directory as it started: the folder its
// MCP client started it in, which a server without a cwd inherits.
var startDir, _ = os.Getwd()

// dirGoneOnce logs the first start that inheritedDir moves.
var dirGoneOnce sync.Once

// inheritedDir is the folder a server without a cwd starts in: "" (toolgate's
// own working directory) while that is there. Once removed (a project
// folder deleted, a git worktree removed under the client), a child started
// in it cannot learn its folder: npm (npx), uv (uvx) and Python fail at
// start (`Error: ENOENT: no such file or directory, uv_cwd`), and the
// server stayed down with the fix to check its command. It then starts in
// the folder made again at that path, else in /, as a server a client
// such as Claude Desktop starts does.
func inheritedDir(log *slog.Logger) string {
	if _, err := unix.Getwd(); err == nil || !errors.Is(err, unix.ENOENT) {
		return ""
	}
	dir := "/"
	if fi, err := os.Stat(startDir); err == nil && fi.IsDir() && startDir != "" {
		dir = startDir
	}
	if log != nil {
		dirGoneOnce.Do(func() {
			log.Warn("toolgate's working directory "+startDir+" was removed while it runs: the stdio servers without a cwd start in "+dir+" from now on (npx, uvx and Python cannot start in a folder removed)",
				"fix", `give each stdio server a "cwd" in the config to choose its folder, or restart toolgate from a folder that stays`)
		})
	}
	return dir
}

// startProc starts srv's command with an allowlisted environment in its own
// process group, stdout filtered into out (JSON lines only) and stderr drained
// into the log.
func startProc(srv config.Server, pc procConfig) (*proc, error) {
	env := childEnv(pc.environment, pc.envAllow, srv.Env)
	path, err := resolveCommand(srv, env)
	if err != nil {
		return nil, err
	}
	dir := srv.Cwd
	if dir == "" {
		dir = inheritedDir(pc.log)
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{srv.Command}, srv.Args...),
		Env:         env,
		Dir:         dir,
		SysProcAttr: sysProcAttr(),
	}
	var lifeR, lifeW *os.File
	if pc.reaper && reaperAvailable {
		exe, err := selfExecutable()
		if err != nil {
			return nil, fmt.Errorf("find toolgate's executable to run the reaper: %w", err)
		}
		if lifeR, lifeW, err = os.Pipe(); err != nil {
			return nil, exhausted(fmt.Errorf("pipes: %w", err))
		}
		// The reaper execs path with argv, once it holds the process group.
		cmd.Args = append([]string{"toolgate-reaper", path}, cmd.Args...)
		cmd.Path = exe
		cmd.Env = append(slices.Clone(env), EnvReaper+"=3")
		cmd.ExtraFiles = []*os.File{lifeR} // fd 3
		// No parent-death signal: it would kill the reaper before it can
		// clean up; the lifeline tells it instead.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll(files)
		return nil, exhausted(fmt.Errorf("pipes: %w", err))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	// The child holds its ends now; the parent keeps only its own.
	closeAll([]*os.File{inR, outW, errW, lifeR})
	if err != nil {
		closeAll([]*os.File{inW, outR, errR, lifeW})
		return nil, exhausted(fmt.Errorf("start %s: %w", srv.Command, err))
	}
	pr, pw := io.Pipe()
	p := &proc{
		name:       srv.Name,
		pid:        cmd.Process.Pid,
		log:        pc.log,
		cmd:        cmd,
		stdin:      inW,
		out:        pr,
		outR:       outR,
		errR:       errR,
		tail:       newLineTail(pc.stderrTail),
		noise:      firstLines{n: 3},
		history:    pc.history,
		mask:       pc.mask,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		stdoutDone: make(chan struct{}),
		lifeline:   lifeW,
	}
	p.readers.Add(3)
	go func() {
		defer p.readers.Done()
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go func() {
		defer p.readers.Done()
		defer close(p.stdoutDone)
		p.pumpStdout(outR, pw, pc.maxFrame)
	}()
	go func() {
		defer p.readers.Done()
		defer close(p.stderrDone)
		p.drainStderr(errR, pc.stderrRate)
	}()
	return p, nil
}

// resourceError marks a start that failed for want of file descriptors,
// processes or memory: not the server's config, so the backend is restarted
// as after a crash (RestartDelays), and the error names the limit to raise.
type resourceError struct{ error }

func (e resourceError) Unwrap() error { return e.error }

// exhausted wraps err in a resourceError with the fix when the system
// refused a resource (EMFILE, ENFILE, EAGAIN, ENOMEM): a process that
// cannot start, or a connection to a remote server that cannot be made.
// Other errors are returned as they are.
func exhausted(err error) error {
	var fix string
	var re resourceError
	switch {
	case errors.As(err, &re):
		return err
	case errors.Is(err, syscall.EMFILE):
		fix = storage.ShortageFix(syscall.EMFILE) + " or run fewer servers; retried after restart.delays"
	case errors.Is(err, syscall.ENFILE):
		fix = storage.ShortageFix(syscall.ENFILE) + "; retried after restart.delays"
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		fix = "the system refused a new process (process or memory limit: ulimit -u, TasksMax= in a systemd unit, free memory); retried after restart.delays"
	default:
		return err
	}
	return resourceError{fmt.Errorf("%w: %s", err, fix)}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// exitErr describes how the process ended, with the last stderr lines. It
// waits briefly for stderr to be drained (the lines explaining a crash are
// usually the last ones written).
func (p *proc) exitErr() error {
	msg := p.exitStatus()
	if msg == "" {
		return nil
	}
	return errors.New(msg + p.tail.suffix())
}

// exitStatus says how the process ended ("exited with exit status 1"), ""
// while it runs; its stderr and stdout have been read to the end (or for
// 500 ms) when it returns, so tail and noise hold what it wrote.
func (p *proc) exitStatus() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	wait, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for _, done := range []chan struct{}{p.stderrDone, p.stdoutDone} {
		select {
		case <-done:
		case <-wait.Done():
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(p.waitErr, &ee):
		return "exited with " + ee.ProcessState.String()
	case p.waitErr == nil:
		return "exited with status 0"
	}
	return "exited"
}

// stderrSuffix is "; last stderr: ..." or "".
func (p *proc) stderrSuffix() string { return p.tail.suffix() }

// outputSuffix is what the process wrote, for an error that ends its
// start: the first lines on stdout that are not JSON-RPC (a usage text, a
// banner: a command that is not an MCP server), then stderrSuffix.
func (p *proc) outputSuffix() string {
	lines, n := p.noise.get()
	if n == 0 {
		return p.stderrSuffix()
	}
	q := make([]string, len(lines))
	for i, l := range lines {
		q[i] = strconv.Quote(l)
	}
	s := "; on stdout, not JSON-RPC: " + strings.Join(q, ", ")
	if n > len(lines) {
		s += fmt.Sprintf(" … (%d lines)", n)
	}
	return s + p.stderrSuffix()
}

// localURL is the first URL on this machine that the process's output
// names ("Listening on http://localhost:3000/mcp"), or "": a server that
// serves HTTP, started as a stdio command.
func (p *proc) localURL() string {
	lines, _ := p.noise.get()
	for _, l := range append(lines, p.tail.get()...) {
		if u := strings.TrimRight(localURLPattern.FindString(l), "."); u != "" {
			return u // without the full stop of "… at http://localhost:3000."
		}
	}
	return ""
}

var localURLPattern = regexp.MustCompile(`https?://(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\])(?::\d+)?[^\s"'<>,;)]*`)

// firstLines keeps the first n lines added, and counts them all.
type firstLines struct {
	mu    sync.Mutex
	n     int
	seen  int
	lines []string
}

func (f *firstLines) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen++
	if len(f.lines) < f.n {
		f.lines = append(f.lines, s)
	}
}

// get returns the lines kept and how many were added.
func (f *firstLines) get() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lines), f.seen
}

// stop ends the process and everything in its process group: close stdin,
// wait up to grace for the leader to exit, SIGTERM the group, wait up to
// killAfter for it to empty, SIGKILL the group. It returns when the leader is
// reaped and the pipe readers have ended.
func (p *proc) stop(grace, killAfter time.Duration) {
	p.stopOnce.Do(func() { p.doStop(grace, killAfter) })
}

func (p *proc) doStop(grace, killAfter time.Duration) {
	p.stdin.Close()
	p.out.Close() // the transport is done reading; the pump discards what is left
	select {
	case <-p.exited:
	case <-time.After(grace):
		if grace > 0 { // 0: an aborted start, which gives it no time
			p.log.Info("backend did not exit after stdin was closed; sending SIGTERM", keyGrace, grace)
		}
	}
	pgid := p.pid
	if groupAlive(pgid) {
		// A reaper forwards the SIGTERM to every process below it: signalled
		// as a group too, each would get two (a server may read a second
		// one as "stop now").
		target := -pgid
		if p.lifeline != nil {
			target = p.pid
		}
		_ = syscall.Kill(target, syscall.SIGTERM)
		if !waitGroupGone(pgid, p.exited, killAfter) {
			p.log.Warn("backend process group still alive after SIGTERM; sending SIGKILL", keyGrace, killAfter)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	<-p.exited
	if p.lifeline != nil {
		p.lifeline.Close() // the reaper (if somehow still there) kills what is left
	}
	// Readers end at EOF once every process holding the pipes is gone. A
	// process that left the group (setsid) could keep them open: don't wait
	// for it.
	done := make(chan struct{})
	go func() { p.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		p.outR.Close()
		p.errR.Close()
		<-done
		return
	}
	p.outR.Close()
	p.errR.Close()
}

// waitGroupGone polls until the group has no live member and the leader is
// reaped, or d passes.
func waitGroupGone(pgid int, exited <-chan struct{}, d time.Duration) bool {
	deadline := time.Now().Add(d)
	tick := 10 * time.Millisecond
	for {
		select {
		case <-exited:
			if !groupAlive(pgid) {
				return true
			}
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(tick)
		tick = min(tick*2, 100*time.Millisecond)
	}
}

// pumpStdout copies JSON lines from r to w and logs everything else (banners,
// progress output of npx) instead of letting it break the JSON-RPC stream. A
// line longer than maxFrame is dropped; if its JSON-RPC id can be found, an
// error response for that id takes its place so the caller hears why at once.
func (p *proc) pumpStdout(r io.Reader, w *io.PipeWriter, maxFrame int) {
	defer w.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		writeErr error
		ignored  int
	)
	for {
		line, n, head, tailB, err := readLine(br, maxFrame)
		switch {
		case n == 0:
		case line == nil: // too long
			p.log.Error("backend sent a JSON-RPC message larger than the cap; dropped it",
				keyBytes, n, keyLimit, maxFrame)
			if id, ok := responseID(head, tailB); ok && writeErr == nil {
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"the backend's response (more than %d bytes) %s of %d bytes; ask for less output"}}`+"\n", id, n, capWords, maxFrame)
				_, writeErr = io.WriteString(w, msg)
			}
		default:
			t := bytes.TrimSpace(line)
			if len(t) == 0 {
				break
			}
			// A JSON-RPC message (or batch) names its version; JSON log lines
			// and banners don't, and would break go-sdk's decoder.
			if (t[0] == '{' || t[0] == '[') && bytes.Contains(t, jsonrpcKey) {
				// go-sdk's decoder's own parser: what it can read. encoding/json's
				// Valid took 110 ms of a 15 MB result's line, this 15 to 50.
				if !segjson.Valid(t) {
					p.log.Error("backend sent malformed JSON-RPC; dropped it", keyLine, p.mask(truncate(string(t), 200)))
					if id, ok := responseID(t[:min(len(t), 512)], t[max(0, len(t)-512):]); ok && writeErr == nil {
						_, writeErr = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32700,"message":"the backend sent malformed JSON for this response"}}`+"\n", id)
					}
					break
				}
				if writeErr == nil {
					_, writeErr = w.Write(line)
				}
				break
			}
			ignored++
			p.noise.add(p.mask(truncate(string(t), 200)))
			if ignored <= 20 {
				p.log.Warn("ignored non-JSON line on backend stdout", keyLine, p.mask(truncate(string(t), 200)))
			} else if ignored == 21 {
				p.log.Warn("more non-JSON lines on backend stdout; no longer logging them")
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one '\n'-terminated line. If it is longer than max, line is
// nil, n its length so far, and head/tail its first and last bytes (enough
// to find a JSON-RPC id); the rest of the line is consumed.
func readLine(br *bufio.Reader, max int) (line []byte, n int, head, tail []byte, err error) {
	var buf []byte
	tooLong := false
	for {
		chunk, e := br.ReadSlice('\n')
		n += len(chunk)
		if !tooLong && len(buf)+len(chunk) > max {
			tooLong = true
			head = append([]byte(nil), buf[:min(len(buf), 512)]...)
			if len(head) < 512 {
				head = append(head, chunk[:min(len(chunk), 512-len(head))]...)
			}
			buf = nil
		}
		if tooLong {
			tail = append(tail, chunk...)
			if len(tail) > 512 {
				tail = append(tail[:0], tail[len(tail)-512:]...)
			}
		} else {
			buf = linerpc.Gather(buf, chunk)
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return nil, n, head, tail, e
		}
		return buf, n, nil, nil, e
	}
}

var jsonrpcKey = []byte(`"jsonrpc"`)

var (
	idHead = regexp.MustCompile(`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")`)
	idTail = regexp.MustCompile(`,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$`)
)

// responseID finds the id of what looks like a JSON-RPC response (not a
// request: those carry a "method" and their ids are the server's own).
func responseID(head, tail []byte) (string, bool) {
	if bytes.Contains(head, []byte(`"method"`)) {
		return "", false
	}
	return findID(head, tail)
}

// findID finds the id of a JSON-RPC response from its first or last bytes
// (go-sdk writes it first, the TypeScript SDK last).
func findID(head, tail []byte) (string, bool) {
	if m := idHead.FindSubmatch(head); m != nil {
		return string(m[1]), true
	}
	if m := idTail.FindSubmatch(tail); m != nil {
		return string(m[1]), true
	}
	return "", false
}

// drainStderr logs each stderr line (masked, at most rate lines per second
// with a burst of 4×rate; the count of dropped lines is logged when logging
// resumes) and keeps the last lines for error messages.
func (p *proc) drainStderr(r io.Reader, rate float64) {
	br := bufio.NewReaderSize(r, 16<<10)
	burst := 4 * rate
	tokens, last := burst, time.Now()
	dropped := 0
	for {
		line, _, head, _, err := readLine(br, 16<<10)
		if line == nil {
			line = head // an endless line: keep its start
		}
		if s := strings.TrimRight(string(line), "\r\n"); s != "" {
			s = p.mask(truncate(s, 2000))
			shown := screenLine(s)
			p.tail.add(shown)
			if p.history != nil {
				p.history.add(shown)
			}
			now := time.Now()
			tokens = min(burst, tokens+now.Sub(last).Seconds()*rate)
			last = now
			if tokens >= 1 {
				tokens--
				if dropped > 0 {
					p.log.Warn("backend stderr lines dropped (rate limit)", keyCount, dropped)
					dropped = 0
				}
				p.log.Info("backend stderr", keyLine, s)
			} else {
				dropped++
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			if dropped > 0 {
				p.log.Warn("backend stderr lines dropped (rate limit)", keyCount, dropped)
			}
			return
		}
	}
}

// screenLine is a stderr line as the model may read it (in
// toolgate__server_status, in the server's errors): a line that addresses
// a model or hides text (quarantine.Scanner.ScanLine) is withheld there,
// saying why; another has its control characters escaped (termtext), as
// a client may print the model's tool answers on a terminal, where an
// escape could hide the line from the user. The log keeps it as written.
func screenLine(s string) string {
	fs := quarantine.Scanner{}.ScanLine(s)
	if len(fs) == 0 {
		return termtext.Escape(s)
	}
	return "[stderr line withheld: " + findingsWhy(fs) + "; toolgate logs shows it]"
}

// truncate is oneline.Clip: at most n bytes of s, cut between characters.
var truncate = oneline.Clip

// lineTail keeps the last n lines, and the first that says the process ran
// out of descriptors, threads or memory (a crash dump may push it out of
// the last n).
type lineTail struct {
	mu    sync.Mutex
	n     int
	lines []string
	short string // the first line that names an exhausted resource
	fix   string // and its fix
}

func newLineTail(n int) *lineTail { return &lineTail{n: n} }

func (t *lineTail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.short == "" {
		if fix := shortOf(s); fix != "" {
			t.short, t.fix = s, fix
		}
	}
	t.lines = append(t.lines, s)
	if len(t.lines) > t.n {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-t.n:]...)
	}
}

func (t *lineTail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// exhaustion returns the first stderr line that said the process ran out of
// a resource, and the fix; "" when none did.
func (t *lineTail) exhaustion() (line, fix string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.short, t.fix
}

// shortages are what a server's runtime prints when the system refuses it a
// resource (lower case): the C library's strerror (Python, Go, most
// runtimes), Node's error codes and its own assertion, Go's runtime, Rust's
// thread pool. A server inherits toolgate's limits, so one that crashes at
// start with these was refused what toolgate's limits allow.
var shortages = []struct {
	says []string
	fix  func() string
}{
	{[]string{"too many open files in system", "enfile"}, func() string {
		return "the system has no file descriptors left (fs.file-max): close other programs or raise it"
	}},
	{[]string{"too many open files", "emfile", "errno 24", "error 24"}, func() string {
		n := "?"
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
			n = strconv.FormatUint(lim.Cur, 10)
		}
		return "the server ran out of file descriptors: it inherits toolgate's open-files limit (" + n + "): raise it (ulimit -n; LimitNOFILE= in a systemd unit)"
	}},
	{[]string{"pthread_create failed", "failed to create new os thread", "uv_thread_create", "can't start new thread",
		"threadpoolbuilderror", "cannot fork", "fork: retry", "fork: resource temporarily unavailable"}, func() string {
		return "the server could not create a thread or process: raise the process limit toolgate and its servers share (ulimit -u; TasksMax= in a systemd unit; a container's pids limit)"
	}},
	{[]string{"cannot allocate memory", "enomem"}, func() string {
		return "the server was refused memory: raise the memory limit (ulimit -v; MemoryMax= in a systemd unit) or free memory"
	}},
}

// shortOf returns the fix for a stderr line that says a resource ran out,
// "" for any other line.
func shortOf(line string) string {
	l := strings.ToLower(line)
	for _, sh := range shortages {
		for _, w := range sh.says {
			if strings.Contains(l, w) {
				return sh.fix()
			}
		}
	}
	return ""
}

// suffix renders the kept lines for an error message.
func (t *lineTail) suffix() string {
	lines := t.get()
	if len(lines) == 0 {
		return " (no stderr output)"
	}
	return "; last stderr lines:\n  " + strings.Join(lines, "\n  ")
}

// pathPrefix starts the search path that a "not found in PATH" error quotes
// for the operator.
const pathPrefix = "PATH="

// pathDetail matches that quote in an error's text.
var pathDetail = regexp.MustCompile(` \(` + pathPrefix + `[^)]*\)`)

// ForModel is a server's error as a model may read it: without the
// gateway's search path, which only the operator can act on and which
// tells the host's layout (600 characters of it reached an agent).
func ForModel(reason string) string {
	return pathDetail.ReplaceAllString(reason, "")
}
